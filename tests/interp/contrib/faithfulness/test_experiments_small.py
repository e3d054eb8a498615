import math

from interp.contrib.faithfulness.experiments import attribution_robustness


def test_attribution_experiment_runs_small(capsys):
    res = attribution_robustness.main(["--seeds", "1", "--max-steps", "3"])
    row = res["mlp_saliency"]["lr=0.1"]
    assert 0.0 <= row["random_topk"] <= 1.0 and math.isfinite(row["input_hessian_fro"])
    assert set(res["attention_pattern"]) == {f"{k} lr={lr}" for k in ("softmax", "kernel") for lr in (0.01, 0.1, 0.5)}
