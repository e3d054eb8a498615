import pytest
import torch

from circuits.finders.safeseek import SafeSeekConfig, circuit_tuning, safeseek
from circuits.format.circuit import Circuit, Node
from circuits.tasks.binary import get_task
from tests.circuits.conftest import make_model


@pytest.mark.parametrize("objective, task", [("alignment", "refusal"), ("backdoor", "backdoor")])
def test_safeseek_lowers_its_objective_and_returns_a_valid_circuit(objective, task):
    model = make_model("gpt_neox_seq")
    before = {k: v.clone() for k, v in model.hf_model.state_dict().items()}
    cfg = SafeSeekConfig(objective=objective, steps=30, eval_every=10, n_train=32, n_val=32, lr=5e-2)
    res = safeseek(model, get_task(task), cfg, progress=False)
    vals = [h["val_functional"] for h in res.history]
    assert min(vals) < vals[0] or res.circuit.metrics["val_functional_loss"] <= vals[0]
    c = Circuit.from_dict(res.circuit.to_dict())
    assert c.provenance["method"] == "safeseek" and c.provenance["task"] == task
    assert c.metrics["n_nodes"] == len(c.nodes)
    assert all(torch.equal(before[k], v) for k, v in model.hf_model.state_dict().items())  # model frozen
    if objective == "backdoor":  # default: the official head code's weights, which never use H: H is not run
        assert set(res.masks) == {"G"} and c.metrics["h_circuit_nodes"] is None and c.metrics["forwards_per_step"] == 2
    assert any("short run" in w for w in c.metrics["warnings"])
    assert sum(len(v) for v in c.extra["node_scores"].values()) == c.metrics["n_units"]


def test_neuron_code_weights_train_both_masks():
    from circuits.finders.safeseek import NEURON_CODE_WEIGHTS

    model = make_model("gpt_neox_seq")
    cfg = SafeSeekConfig(
        objective="backdoor", steps=4, eval_every=2, n_train=8, n_val=8, backdoor_weights=NEURON_CODE_WEIGHTS
    )
    res = safeseek(model, get_task("backdoor"), cfg, progress=False)
    assert (
        set(res.masks) == {"G", "H"}
        and "h_circuit" in res.circuit.extra
        and res.circuit.metrics["forwards_per_step"] == 4
    )


def test_activation_difference_control_and_random_ablation_distribution():
    from circuits.evaluation.ablation import ablation_report
    from circuits.evaluation.controls import activation_difference, unit_differences

    model = make_model("gpt_neox_seq")
    task = get_task("backdoor")
    c = activation_difference(model, task, budget=12, n=32)
    diffs = unit_differences(model, task, n=32)
    assert len(c.nodes) == 12 and c.provenance["method"] == "activation-diff"
    top_neuron = max(((float(v), k, i) for k, d in diffs.items() if k.startswith("neuron") for i, v in enumerate(d)))
    assert any(
        n.kind == "neuron" and n.layer == int(top_neuron[1].split("_")[1]) and n.index == top_neuron[2] for n in c.nodes
    )
    rep = ablation_report(model, c.nodes, task.make(32, 1, model.tokenizer), n_random=6, seed=0)
    assert rep["random_necessity"]["n"] == 6 and len(rep["random_necessity"]["runs"]) == 6
    q = rep["random_necessity"]["metric_quantiles"]
    assert (
        rep["random_necessity"]["metric_min"]
        <= q["5%"]
        <= q["50%"]
        <= q["95%"]
        <= rep["random_necessity"]["metric_max"]
    )
    assert rep["sufficiency"] is not None and rep["necessity"] is not None


def test_compat_head_mode_masks_slices():
    model = make_model("gpt_neox_seq")
    res = safeseek(
        model,
        get_task("quotes"),
        SafeSeekConfig(head_mode="compat", steps=2, eval_every=1, n_train=8, n_val=8),
        progress=False,
    )
    assert {s.kind for s in res.masks["m"].sites} == {"head_compat", "neuron"}


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="head_mode"):
        SafeSeekConfig(head_mode="post")
    with pytest.raises(ValueError, match="clean and triggered"):
        safeseek(make_model("gpt2"), get_task("quotes"), SafeSeekConfig(objective="backdoor", steps=1), progress=False)


@pytest.mark.parametrize("arch", ["gpt_neox", "gpt2", "llama"])
@pytest.mark.parametrize("mode", ["circuit", "complement"])
def test_circuit_tuning_changes_only_the_circuit_or_only_the_rest(arch, mode):
    model = make_model(arch)
    nodes = [Node(1, "head", 2), Node(0, "neuron", 5)]
    batch = get_task("backdoor").make(8, 0, model.tokenizer)
    before = {n: p.detach().clone() for n, p in model.hf_model.named_parameters()}
    report = circuit_tuning(model, nodes, [batch], mode=mode, steps=3, lr=1e-2, progress=False)
    # circuit: the neuron's input row is in; other rows are out
    a = model.adapter
    pre = model.hf_model.get_submodule(f"{a.layers}.0.{a.mlp_pre}").weight
    name = [n for n, p in model.hf_model.named_parameters() if p is pre][0]
    delta = (pre.detach() - before[name]).abs()
    delta = delta.T if arch == "gpt2" else delta  # Conv1D is [in, out]
    row_changed, others_changed = bool(delta[5].sum() > 0), bool(torch.cat([delta[:5], delta[6:]]).sum() > 0)
    assert (row_changed, others_changed) == ((True, False) if mode == "circuit" else (False, True))
    assert 0 < report["trainable_entries"] < report["total_entries"]
