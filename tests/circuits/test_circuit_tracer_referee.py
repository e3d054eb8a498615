"""circuit-tracer 0.5.0 as a referee: its own `attribute` runs, offline on CPU, on a tiny random Llama with random
per-layer (plain and skip) and cross-layer transcoders, under its own venv (circuits/experiments/
circuit_tracer_referee.py)."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from circuits.experiments.circuit_tracer_referee import write_random_transcoders
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf

ROOT = Path(__file__).resolve().parents[2]
VENV_PY = ROOT / ".cache" / "anchors" / "venv-ct" / "bin" / "python"
RUNNER = ROOT / "circuits" / "experiments" / "circuit_tracer_referee.py"
PROMPT = "The capital of France is"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not VENV_PY.exists(),
        reason="circuit-tracer's own venv is absent (.cache/anchors/venv-ct); it needs transformers<=4.57.3, so it "
        "runs outside the project's .venv: build it with `bash circuits/experiments/circuit_tracer_env.sh`",
    ),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A 2-layer d-64 random Llama and the byte tokenizer, saved by transformers 5 (the project's)."""
    folder = tmp_path_factory.mktemp("tiny-model")
    hf = tiny_hf("llama", seed=0)
    hf.config.architectures = ["LlamaForCausalLM"]
    hf.save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder, hf


def _pre_activations(hf, tc_dir: Path, kind: str, ids: torch.Tensor) -> torch.Tensor:
    """[n_layers, n_pos, d_tc] encoder pre-activations on `ln2.hook_normalized` (the RMS-normalised residual
    before the norm's weight), computed here with the project's transformers, independently of circuit-tracer."""
    inputs = {}
    hooks = [
        layer.post_attention_layernorm.register_forward_pre_hook(lambda m, a, i=i: inputs.__setitem__(i, a[0]))
        for i, layer in enumerate(hf.model.layers)
    ]
    with torch.no_grad():
        hf(ids[None])
    for h in hooks:
        h.remove()
    out = []
    for i in range(len(hf.model.layers)):
        x = inputs[i][0]
        eps = hf.model.layers[i].post_attention_layernorm.variance_epsilon
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        if kind != "clt":
            t = load_file(tc_dir / f"layer_{i}.safetensors")
            w, b, thr = t["W_enc"], t["b_enc"], t["activation_function.threshold"]
        else:
            t = load_file(tc_dir / f"W_enc_{i}.safetensors")
            w, b, thr = t[f"W_enc_{i}"], t[f"b_enc_{i}"], t[f"threshold_{i}"]
        pre = x @ w.T + b
        out.append(torch.where(pre > thr, pre, torch.zeros_like(pre)))
    return torch.stack(out)


@pytest.mark.parametrize("kind", ["plt", "skip", "clt"])
def test_circuit_tracer_attribute_runs_and_its_graph_is_consistent(tiny_model, tmp_path, kind):
    model_dir, hf = tiny_model
    tc_dir = write_random_transcoders(tmp_path / f"tc-{kind}", kind, n_layers=2, d_model=64, d_tc=96, seed=1)
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [str(VENV_PY), str(RUNNER), "--model", str(model_dir), "--transcoders", str(tc_dir)]
    cmd += ["--prompt", PROMPT, "--out", str(out), "--batch-size", "64", "--check-samples", "8"]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]

    g = load_file(out / "graph.safetensors")
    meta = json.loads((out / "graph.json").read_text())
    n_layers, n_pos = 2, len(PROMPT) + 1
    ids = g["input_tokens"]
    assert ids.tolist() == [256] + list(PROMPT.encode())  # circuit-tracer prepends the BOS (<|endoftext|>, 256)

    n_active, n_logits = len(g["active_features"]), len(g["logit_token_ids"])
    n_nodes = n_active + n_layers * n_pos + n_pos + n_logits
    assert g["adjacency_matrix"].shape == (n_nodes, n_nodes) and meta["counts"]["n_nodes"] == n_nodes
    assert g["active_features"].shape == (n_active, 3) and g["activation_values"].shape == (n_active,)
    assert torch.equal(g["selected_features"], torch.arange(n_active))  # no max_feature_nodes: every feature
    assert n_logits == 10 and torch.all(g["logit_probabilities"].diff() <= 0)
    assert g["error_vectors"].shape == (n_layers, n_pos, 64) and g["logits"].shape == (n_pos, 257)
    blocks = {b["kind"]: (b["start"], b["stop"]) for b in meta["node_ordering"]["blocks"]}
    e0, t0, l0 = n_active, n_active + n_layers * n_pos, n_active + n_layers * n_pos + n_pos
    assert blocks == {"feature": (0, e0), "error": (e0, t0), "token": (t0, l0), "logit": (l0, n_nodes)}

    # the features circuit-tracer found active are the ones our own model and the folder's encoders give
    acts = _pre_activations(hf, tc_dir, kind, ids)
    acts[:, 0] = 0  # circuit-tracer zeroes position 0
    assert torch.equal(acts.nonzero(), g["active_features"])
    assert torch.allclose(acts[tuple(g["active_features"].T)], g["activation_values"], atol=1e-4)
    with torch.no_grad():
        hf_logits = hf(ids[None]).logits[0]
    assert (hf_logits - g["logits"]).abs().max() < 1e-4  # its TL model (transformers 4.57) vs ours (transformers 5)
    assert meta["hf_vs_tl_max_abs_logit_diff"] < 1e-4
    assert meta["transcoders"]["skip_connection"] == (kind == "skip")

    # the graph's shape: inputs only into feature and logit rows, nothing out of logits; position 0 has no error
    A = g["adjacency_matrix"]
    assert A[e0:l0].abs().sum() == 0 and A[:, l0:].abs().sum() == 0
    assert A[l0:, :l0].abs().sum() > 0 and g["error_vectors"][:, 0].abs().sum() == 0

    # circuit-tracer's own check: under frozen patterns, norm scales and MLP outputs, adding a node's value moves
    # every feature pre-activation and demeaned target logit by exactly that node's adjacency column
    check = meta["self_check"]
    assert check["n_nodes_checked"] == {"error": 8, "token": 8, "feature": 8}
    for target, dev in check["max_abs_deviation"].items():
        assert dev < 1e-4 * max(1.0, check["max_abs_expected"][target]), (target, dev)

    scores = meta["scores"]
    assert 0 < scores["replacement"] <= 1 and 0 < scores["completeness"] <= 1
    assert g["node_mask"][t0:].all()  # prune_graph always keeps tokens and logits
    assert g["edge_mask"].shape == A.shape


@pytest.mark.parametrize("kind", ["plt", "clt"])
def test_our_graph_equals_circuit_tracers(tmp_path, kind):
    """`circuits.graph.attribute` against circuit-tracer's own `attribute` on the same tiny model, transcoders and
    tokens: the same nodes, adjacency within 1e-3 of its largest entry, the same scores, and our pruning on their
    adjacency gives their masks."""
    import interp
    from circuits.experiments.graph_referee import referee, write_ct_config
    from circuits.model.transcoders import random_transcoders, save_transcoders
    from interp.data import byte_tokenizer

    model = interp.HookedModel(tiny_hf("llama", seed=0), byte_tokenizer())
    tc_dir = save_transcoders(random_transcoders(2, 64, 32, kind, seed=1, threshold=0.3), tmp_path / "tc")
    write_ct_config(tc_dir, kind, 2)
    r = referee(model, tc_dir, "Hello world, this is", tmp_path / "out", batch_size=16)
    assert r["same_active_features"] and r["same_logit_targets"], r
    assert r["within_tolerance"] and r["adjacency_rel"] < 1e-3, r
    for k in ("replacement", "completeness"):
        assert r["scores"]["ours"][k] == pytest.approx(r["scores"]["theirs"][k], abs=1e-4)
    assert r["our_prune_on_their_adjacency"]["node_masks_equal"]
    assert r["our_prune_on_their_adjacency"]["edge_masks_equal"]
