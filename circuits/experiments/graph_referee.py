"""Our attribution graph beside circuit-tracer 0.5's own, on the same model, transcoders and tokens.

    bash circuits/experiments/circuit_tracer_env.sh          # once: circuit-tracer's own venv (.cache/anchors/venv-ct)
    python -m circuits.experiments.graph_referee --model smollm2-135m --transcoders runs/transcoders/smollm2_plt \
        --prompt "The capital of France is" --out runs/graphs/referee
    python -m circuits.experiments.graph_referee --model smollm2-135m --random plt --out /tmp/ref   # random set

Runs `circuit_tracer_referee.py` under circuit-tracer's venv (its `attribute`, `prune_graph`,
`compute_graph_scores`, every feature visited), then `circuits.graph.attribute` here on the tokens circuit-tracer
attributed (it prepends a BOS), and compares:

- the nodes: active (layer, position, feature) sets equal, activations' largest difference, logit targets equal,
  their probabilities' largest difference;
- the adjacency: largest |ours - theirs| over all entries, divided by the largest |entry| (`adjacency_rel`), and the
  largest difference per row relative to that row's largest entry (`row_rel`);
- the scores: replacement and completeness, ours and theirs; and our pruning (`circuits.graph.influence.prune`) on
  *their* adjacency against their `prune_graph` masks (node and edge masks equal), so that our scoring code is
  refereed on their numbers too.

Tolerance stated: `adjacency_rel` <= 1e-3 (float32 sums in different orders, HF vs TransformerLens forwards that
differ by ~5e-5 in the logits). Writes `referee.json`; prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
VENV_PY = ROOT / ".cache" / "anchors" / "venv-ct" / "bin" / "python"
RUNNER = ROOT / "circuits" / "experiments" / "circuit_tracer_referee.py"
TOLERANCE = 1e-3


def model_folder(model, where: Path) -> Path:
    """An HF folder of the model (config, safetensors weights, tokenizer) for the other venv to read."""
    where.mkdir(parents=True, exist_ok=True)
    config = model.hf_model.config
    named = config.architectures
    config.architectures = named or [type(model.hf_model).__name__]  # GGUF-loaded models name none
    try:
        model.hf_model.save_pretrained(where, safe_serialization=True)
    finally:
        config.architectures = named
    if model.tokenizer is not None and hasattr(model.tokenizer, "save_pretrained"):
        model.tokenizer.save_pretrained(where)
    return where


def run_theirs(
    model_dir: Path,
    tc_dir: Path,
    out: Path,
    prompt: str | None,
    ids: list[int] | None,
    batch: int,
    max_feature_nodes: int | None = None,
) -> dict:
    if not VENV_PY.exists():
        raise FileNotFoundError(
            f"circuit-tracer's venv is absent ({VENV_PY}); "
            "build it with `bash circuits/experiments/circuit_tracer_env.sh`"
        )
    cmd = [str(VENV_PY), str(RUNNER), "--model", str(model_dir), "--transcoders", str(tc_dir), "--out", str(out)]
    cmd += ["--batch-size", str(batch), "--threads", str(torch.get_num_threads())]  # the same threads as ours
    if max_feature_nodes is not None:
        cmd += ["--max-feature-nodes", str(max_feature_nodes), "--check-samples", "0"]
    cmd += ["--prompt", prompt] if ids is None else ["--token-ids", ",".join(map(str, ids))]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"circuit-tracer's run failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads((out / "graph.json").read_text())


def compare(ours, theirs: dict, info: dict) -> dict:
    from circuits.graph.influence import graph_scores, prune

    same_features = torch.equal(ours.features, theirs["active_features"])
    out = {
        "tokens": int(len(ours.tokens)),
        "active_features": [int(len(ours.features)), int(len(theirs["active_features"]))],
        "same_active_features": bool(same_features),
        "same_logit_targets": bool(torch.equal(ours.logit_tokens, theirs["logit_token_ids"])),
    }
    if not (same_features and out["same_logit_targets"]):
        return out
    a, b = ours.adjacency, theirs["adjacency_matrix"]
    diff = (a - b).abs()
    row_scale = b.abs().amax(1).clamp(min=1e-12)
    rows = (b.abs().amax(1) > 0).nonzero().squeeze(1)
    out.update(
        {
            "activation_max_diff": float((ours.activations - theirs["activation_values"]).abs().max()),
            "logit_probability_max_diff": float((ours.logit_probabilities - theirs["logit_probabilities"]).abs().max()),
            "adjacency_max_abs": float(b.abs().max()),
            "adjacency_max_diff": float(diff.max()),
            "adjacency_rel": float(diff.max() / b.abs().max()),
            "row_rel_max": float((diff.amax(1)[rows] / row_scale[rows]).max()),
            "within_tolerance": bool(diff.max() / b.abs().max() <= TOLERANCE),
        }
    )
    ours_scores = {k: ours.meta["scores"][k] for k in ("replacement", "completeness")}
    theirs_scores = {k: info["scores"][k] for k in ("replacement", "completeness")}
    out["scores"] = {"ours": ours_scores, "theirs": theirs_scores}
    n_tok, n_feat = len(ours.tokens), ours.n_features
    mine_on_theirs = prune(b, theirs["logit_probabilities"], n_tok, n_feat)
    out["our_prune_on_their_adjacency"] = {
        "node_masks_equal": bool(torch.equal(mine_on_theirs.node_mask, theirs["node_mask"])),
        "edge_masks_equal": bool(torch.equal(mine_on_theirs.edge_mask, theirs["edge_mask"])),
        "cumulative_max_diff": float((mine_on_theirs.cumulative - theirs["cumulative_scores"]).abs().max()),
    }
    mine = graph_scores(b, theirs["logit_probabilities"], n_feat, ours.n_errors, n_tok)
    out["our_scores_on_their_adjacency"] = mine
    ours_pruned = prune(a, ours.logit_probabilities, n_tok, n_feat)
    out["pruned_nodes"] = {
        "ours": int(ours_pruned.node_mask.sum()),
        "theirs": int(theirs["node_mask"].sum()),
        "same": bool(torch.equal(ours_pruned.node_mask, theirs["node_mask"])),
    }
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--transcoders", metavar="DIR")
    ap.add_argument("--random", choices=["plt", "skip", "clt"], help="a random transcoder set instead (seeded)")
    ap.add_argument("--d-tc", type=int, default=256)
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    from circuits.model.checkpoint import load_checkpoint
    from circuits.model.transcoders import random_transcoders, save_transcoders

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    model = load_checkpoint(a.model)
    if a.random:
        tc = random_transcoders(model.n_layers, model.d_model, a.d_tc, a.random, seed=0, threshold=2.0)
        tc_dir = save_transcoders(tc, out / f"random_{a.random}")
        write_ct_config(tc_dir, a.random, model.n_layers)
    elif a.transcoders:
        tc_dir = Path(a.transcoders)
    else:
        ap.error("give --transcoders DIR or --random plt|skip|clt")
    result = {"model": a.model, **referee(model, tc_dir, a.prompt, out, a.batch_size), "torch_threads": a.threads}
    (out / "referee.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return result


def referee(model, tc_dir: Path, prompt: str, out: Path, batch_size: int = 32) -> dict:
    """Both graphs of `prompt` over the transcoders in `tc_dir`, compared (module doc); files under `out`."""
    from circuits.graph import attribute
    from circuits.model.transcoders import load_transcoders

    tc = load_transcoders(tc_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = model_folder(model, Path(tmp) / "model")
        t = time.perf_counter()
        info = run_theirs(model_dir, tc_dir, out / "theirs", prompt, None, batch_size)
        t_theirs = time.perf_counter() - t
    theirs = load_file(str(out / "theirs" / "graph.safetensors"))
    t = time.perf_counter()
    ours = attribute(model, tc, theirs["input_tokens"], batch_size=batch_size, max_feature_nodes=None)
    t_ours = time.perf_counter() - t
    ours.save(out / "ours")
    return {
        "transcoders": str(tc_dir),
        "kind": tc.kind,
        "prompt": prompt,
        "tolerance_adjacency_rel": TOLERANCE,
        **compare(ours, theirs, info),
        "seconds": {
            "ours_attribute": round(t_ours, 2),
            "theirs_whole_run": round(t_theirs, 2),
            "theirs_attribute": info.get("timings_s", {}).get("attribute"),
        },
    }


def write_ct_config(folder: Path, kind: str, n_layers: int) -> None:
    """circuit-tracer's config.yaml for a folder written by `save_transcoders` (the sae family writes its own)."""
    lines = [
        f"model_kind: {'cross_layer_transcoder' if kind == 'clt' else 'transcoder_set'}",
        "feature_input_hook: ln2.hook_normalized",
        "feature_output_hook: hook_mlp_out",
        f"scan: random-{kind}",
    ]
    if kind != "clt":
        lines.append("transcoders:")
        lines += [f"  - layer_{i}.safetensors" for i in range(n_layers)]
    (folder / "config.yaml").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
