from interp.contrib.moe.experiments.ssmoe import main


def test_ssmoe_experiment_runs_small(capsys):
    res = main(["--seeds", "1", "--steps", "5"])
    per = res["results"]["anisotropic"]
    assert set(per) >= {"original", "ssmoe c=0.5 k=8"}
    assert all(0.0 <= m["entropy"] <= 1.0 and 0.0 <= m["acc"] <= 1.0 for m in per.values())
