"""Run circuit-tracer 0.5.0's own `attribute` on a local model + transcoder folder, offline on CPU, as a referee.

    .cache/anchors/venv-ct/bin/python circuits/experiments/circuit_tracer_referee.py \\
        --model MODEL_DIR --transcoders TC_DIR --prompt "The capital of France is" --out OUT_DIR

This script is standalone: it imports nothing of this project, so that it runs under circuit-tracer's own
environment (circuit-tracer pins transformers<=4.57.3 and huggingface-hub<1, the project runs transformers 5 and
huggingface-hub 1). Build that environment with `bash circuits/experiments/circuit_tracer_env.sh`, which runs
(idempotently):

    python3 -m venv .cache/anchors/venv-ct
    .cache/anchors/venv-ct/bin/pip install "torch==2.13.0" "circuit-tracer==0.5.0" "transformers==4.57.3" \\
        "huggingface-hub==0.36.2" "transformer-lens==2.18.0" "nnsight==0.8.1" "pyarrow==21.0.0"

(`torch==2.13.0` takes the CPU wheel on disk; nothing pulls torchvision. transformer-lens 2.x caps numpy<2 and
pyarrow 22+ needs numpy 2, hence the pyarrow pin: `datasets`, which transformer-lens imports, loads pyarrow.)

What it does, in order:

1. Loads the HF model from MODEL_DIR (config.json + *.safetensors + tokenizer files) with transformers 4.57.3,
   tolerating folders saved by transformers 5: `rope_parameters` is read back into `rope_theta`, the weights are
   read with `safetensors` (never torch.load / pickle) and tied weights filled in, and a tokenizer whose class 4.57
   does not know (`TokenizersBackend`) is rebuilt from `tokenizer.json` with the special tokens of its config.
2. Builds the HookedTransformer with TransformerLens 2.18's own loaders (`get_pretrained_model_config` on a
   sanitised copy of the config, `get_pretrained_state_dict(hf_model=...)`, `load_and_process_state_dict`) with
   fold_ln / center_writing_weights / center_unembed off, as circuit-tracer's `from_pretrained_and_transcoders`
   does. TL 2.18's Llama config ignores `rope_theta` (it keeps 10,000), so `rotary_base` is set from the HF config
   before the model is built. Then circuit-tracer's `_configure_replacement_model(transcoders)` turns it into its
   `TransformerLensReplacementModel` (what `from_pretrained_and_transcoders` does after loading). The HF-vs-TL
   logit difference on the prompt is measured and must be below --logit-tol.
3. Loads the transcoders from TC_DIR with circuit-tracer's own loaders (`load_transcoder_set` for
   `model_kind: transcoder_set`, `load_clt` for `cross_layer_transcoder`), decoders not lazy.
4. Runs `circuit_tracer.attribute(prompt, model, max_n_logits=10, desired_logit_prob=0.95, batch_size=...,
   offload=None)` (their defaults but batch_size), then `prune_graph(graph, 0.8, 0.98)` and
   `compute_graph_scores(graph)` from `circuit_tracer.graph`.
5. Re-checks the graph the way circuit-tracer's own tests do (this script's code, their intervention machinery):
   under a model whose attention patterns, norm scales and MLP outputs are all frozen
   (`setup_intervention_with_freeze` with every layer constrained; with skip transcoders it keeps the skip path
   live and linear, as the graph does), adding one error node's vector, one token embedding, or doubling one
   feature (`feature_intervention`) must change every feature's pre-activation and every target's demeaned logit
   by exactly that node's adjacency column. The largest deviations go in the json (`self_check`).
6. Writes OUT_DIR/graph.safetensors and OUT_DIR/graph.json (schema below).

Outputs. graph.safetensors (all CPU, float32 / int64 / bool):
    adjacency_matrix   [N, N]    A[target, source]: direct effect of the source node on the target node
    active_features    [n_active, 3] int64 (layer, position, feature_idx), sorted lexicographically
    activation_values  [n_active]    the features' activations (post-JumpReLU)
    selected_features  [n_sel] int64 indices into active_features of the feature nodes (all of them here)
    input_tokens       [n_pos] int64 the attributed tokens (circuit-tracer prepends a BOS-like special token)
    logit_token_ids    [n_logits] int64, logit_probabilities [n_logits] float32 (descending probability)
    node_mask [N] bool, edge_mask [N, N] bool, cumulative_scores [N]: prune_graph's PruneResult
    error_vectors      [n_layers, n_pos, d_model] the error nodes' vectors (MLP output - reconstruction; pos 0 zeroed)
    token_vectors      [n_pos, d_model] the token nodes' vectors (W_E rows)
    logits             [n_pos, d_vocab] the TL model's logits on input_tokens
graph.json: versions, inputs, counts, `node_ordering` (the index ranges of the four node blocks, stated below),
`logit_targets` (token strings, ids, probabilities), `scores` (replacement / completeness of the full graph and of
the pruned one), `prune` (kept node and edge counts), `hf_vs_tl_max_abs_logit_diff`, `self_check`, `timings_s`.

Node ordering (circuit-tracer's Graph, from `attribute.py` / `graph.py` / `context_transformerlens.py`):
    [0, n_sel)                          feature nodes: node i is active_features[selected_features[i]]
    [n_sel, n_sel + n_layers*n_pos)     error nodes:   node n_sel + layer * n_pos + position
    next n_pos                          token nodes:   node ... + position
    last n_logits                       logit nodes:   node N - n_logits + k is logit_targets[k]
Rows are targets, columns sources; only feature rows and logit rows are non-zero (error and token nodes have no
inputs), logit columns are zero. A feature row is the effect on the feature's pre-activation (its encoder input);
a logit row is the effect on logit[t] - mean(logits) at the last position. Position 0 (the BOS) carries no feature
and a zero error vector (circuit-tracer's `zero_positions`).

Random transcoders for tests: `write_random_transcoders(dir, kind, n_layers, d_model, d_tc, seed)` (torch +
safetensors only), or `--random-transcoders plt|skip|clt --d-tc N` here, which writes TC_DIR from the model's sizes
before running.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this folder's modules (common.py, ...) must not shadow installed top-level names

DEFAULT_INPUT_HOOK = "ln2.hook_normalized"
DEFAULT_OUTPUT_HOOK = "hook_mlp_out"


# --------------------------------------------------------------------------------------------------------------
# Random transcoder folders in circuit-tracer's local formats (the project's transcoder contract)
# --------------------------------------------------------------------------------------------------------------


def write_random_transcoders(
    out_dir,
    kind: str,
    n_layers: int,
    d_model: int,
    d_tc: int,
    seed: int = 0,
    active_frac: float = 0.05,
    skip: bool = False,
    feature_input_hook: str = DEFAULT_INPUT_HOOK,
    feature_output_hook: str = DEFAULT_OUTPUT_HOOK,
) -> Path:
    """Write a random JumpReLU transcoder folder in circuit-tracer's local format and return its path.

    kind "plt" (per-layer, `model_kind: transcoder_set`): DIR/layer_{i}.safetensors with W_enc [d_tc, d_model],
    W_dec [d_tc, d_model], b_enc [d_tc], b_dec [d_model], activation_function.threshold [d_tc]; kind "skip" (or
    `skip=True`) adds W_skip [d_model, d_model] (output += input @ W_skip.T). kind "clt" (`model_kind:
    cross_layer_transcoder`): DIR/W_enc_{i}.safetensors (W_enc_{i}, b_enc_{i}, b_dec_{i}, threshold_{i}) and
    DIR/W_dec_{i}.safetensors (W_dec_{i} [d_tc, n_layers-i, d_model]). Plus DIR/config.yaml (hooks, scan, and for a
    transcoder set the layer files, relative to DIR; absolute paths are read too).

    Encoder rows have unit norm, so on a unit-RMS input (`ln2.hook_normalized` is the RMS-normalised residual
    before the norm's weight) a pre-activation is about N(0, 1); the thresholds sit near the (1 - active_frac)
    normal quantile, so about `active_frac` of the (feature, position) pairs fire.
    """
    import torch
    from safetensors.torch import save_file

    if kind not in ("plt", "skip", "clt"):
        raise ValueError(f"kind must be 'plt', 'skip' or 'clt', not {kind!r}")
    skip = skip or kind == "skip"
    if skip and kind == "clt":
        raise ValueError("skip connections are written for per-layer transcoders only")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    z = torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(1.0 - active_frac)).item()

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    def encoder():
        w = randn(d_tc, d_model)
        w = w / w.norm(dim=1, keepdim=True)
        b = 0.1 * randn(d_tc)
        threshold = (z * torch.exp(0.1 * randn(d_tc))).clamp(min=0.05)
        return w.contiguous(), b, threshold

    files = []
    for i in range(n_layers):
        w_enc, b_enc, threshold = encoder()
        b_dec = 0.02 * randn(d_model)
        if kind != "clt":
            tensors = {
                "W_enc": w_enc,
                "W_dec": randn(d_tc, d_model) / math.sqrt(d_model),
                "b_enc": b_enc,
                "b_dec": b_dec,
                "activation_function.threshold": threshold,
            }
            if skip:
                tensors["W_skip"] = 0.1 * randn(d_model, d_model) / math.sqrt(d_model)
            name = f"layer_{i}.safetensors"
            save_file(tensors, str(out / name))
            files.append(name)
        else:
            enc = {f"W_enc_{i}": w_enc, f"b_enc_{i}": b_enc, f"b_dec_{i}": b_dec, f"threshold_{i}": threshold}
            save_file(enc, str(out / f"W_enc_{i}.safetensors"))
            w_dec = randn(d_tc, n_layers - i, d_model) / math.sqrt(d_model * (n_layers - i))
            save_file({f"W_dec_{i}": w_dec.contiguous()}, str(out / f"W_dec_{i}.safetensors"))
    lines = [
        f"model_kind: {'cross_layer_transcoder' if kind == 'clt' else 'transcoder_set'}",
        f"feature_input_hook: {feature_input_hook}",
        f"feature_output_hook: {feature_output_hook}",
        f"scan: random-{kind}-L{n_layers}-d{d_model}-w{d_tc}-seed{seed}",
    ]
    if files:
        lines.append("transcoders:")
        lines += [f"  - {f}" for f in files]
    (out / "config.yaml").write_text("\n".join(lines) + "\n")
    return out


def load_transcoders_local(tc_dir, device="cpu"):
    """circuit-tracer's TranscoderSet / CrossLayerTranscoder from a local folder, with its own loaders."""
    import torch
    import yaml
    from circuit_tracer.transcoder.cross_layer_transcoder import load_clt
    from circuit_tracer.transcoder.single_layer_transcoder import load_transcoder_set

    tc_dir = Path(tc_dir).resolve()
    cfg = yaml.safe_load((tc_dir / "config.yaml").read_text())
    kind = cfg["model_kind"]
    common = dict(
        scan=cfg.get("scan") or tc_dir.name,
        feature_input_hook=cfg.get("feature_input_hook", DEFAULT_INPUT_HOOK),
        feature_output_hook=cfg.get("feature_output_hook", DEFAULT_OUTPUT_HOOK),
        device=torch.device(device),
        dtype=torch.float32,
        lazy_encoder=False,
        lazy_decoder=False,
    )
    if kind == "transcoder_set":
        if cfg.get("transcoders"):
            paths = [Path(p) if Path(p).is_absolute() else tc_dir / p for p in cfg["transcoders"]]
        else:
            paths = [tc_dir / f"layer_{i}.safetensors" for i in range(len(list(tc_dir.glob("layer_*.safetensors"))))]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"transcoder files missing: {missing}")
        return load_transcoder_set({i: str(p) for i, p in enumerate(paths)}, **common), cfg
    if kind == "cross_layer_transcoder":
        return load_clt(str(tc_dir), **common), cfg
    raise ValueError(f"unknown model_kind {kind!r} in {tc_dir / 'config.yaml'}")


# --------------------------------------------------------------------------------------------------------------
# The model: HF (transformers 4.57) -> TransformerLens 2.x -> circuit-tracer's replacement model
# --------------------------------------------------------------------------------------------------------------


def _fixed_hf_config(model_dir: Path):
    """The HF config, with what transformers 5 writes differently put back the way 4.57 reads it."""
    from transformers import AutoConfig

    raw = json.loads((model_dir / "config.json").read_text())
    config = AutoConfig.from_pretrained(str(model_dir))
    rope = raw.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" not in raw:
        config.rope_theta = float(rope["rope_theta"])
        extra = {k: v for k, v in rope.items() if k not in ("rope_theta",)}
        if extra.get("rope_type", "default") != "default":
            config.rope_scaling = extra
    if not getattr(config, "architectures", None):
        raise ValueError(f"{model_dir}/config.json has no `architectures`; set it (e.g. ['LlamaForCausalLM'])")
    return config


def _load_safetensors_state(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        shards = sorted(p.name for p in model_dir.glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"no *.safetensors in {model_dir}")
    state = {}
    for s in shards:
        state.update(load_file(str(model_dir / s)))
    return state


def load_hf_model(model_dir, config=None):
    """The HF causal LM from a local folder, float32, eager attention, weights read with safetensors only."""
    import torch
    from transformers import AutoModelForCausalLM

    model_dir = Path(model_dir)
    config = config or _fixed_hf_config(model_dir)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    state = _load_safetensors_state(model_dir)
    # tied parameters (lm_head <-> embed_tokens): transformers 5 saves one name only
    groups: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    for names in groups.values():
        present = [n for n in names if n in state]
        if present:
            for n in names:
                state.setdefault(n, state[present[0]])
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=True)
    return model.eval()


def load_tokenizer(model_dir):
    """AutoTokenizer, else a PreTrainedTokenizerFast on tokenizer.json with the special tokens of its config."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    model_dir = Path(model_dir)
    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
        how = "AutoTokenizer"
    except (ValueError, OSError, KeyError, AttributeError):
        cfg_path = model_dir / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        special = {
            k: (v["content"] if isinstance(v, dict) else v)
            for k, v in cfg.items()
            if k in ("bos_token", "eos_token", "pad_token", "unk_token") and v is not None
        }
        tok = PreTrainedTokenizerFast(tokenizer_file=str(model_dir / "tokenizer.json"), **special)
        how = "PreTrainedTokenizerFast(tokenizer.json) fallback"
    # TransformerLens' set_tokenizer reloads the tokenizer from disk with add_bos_token=True unless that flag is in
    # its init kwargs; circuit-tracer tokenizes with add_special_tokens=False and prepends the BOS itself.
    tok.init_kwargs["add_bos_token"] = True
    tok.init_kwargs.setdefault("name_or_path", str(model_dir))
    return tok, how


def _tl_config_dir(hf_config) -> Path:
    """A temporary folder holding only the (fixed) config.json, for TL's loaders. TL 2.x branches on the names
    'llama' / 'gemma' in the path (and then crashes on a local folder), so the path must contain neither."""
    while True:
        d = Path(tempfile.mkdtemp(prefix="ctref-")) / "tl-model"  # TL names the model after the last part
        if "llama" not in str(d).lower() and "gemma" not in str(d).lower():
            break
        d.parent.rmdir()
    d.mkdir()
    (d / "config.json").write_text(hf_config.to_json_string())
    return d


def build_replacement_model(model_dir, transcoders, n_ctx: int = 1024, device: str = "cpu"):
    """circuit-tracer's TransformerLensReplacementModel over the local model; returns (model, hf_model, info)."""
    import torch
    from circuit_tracer.replacement_model.replacement_model_transformerlens import TransformerLensReplacementModel
    from transformer_lens import loading_from_pretrained as loading

    model_dir = Path(model_dir)
    hf_config = _fixed_hf_config(model_dir)
    hf_model = load_hf_model(model_dir, hf_config)
    tokenizer, tok_how = load_tokenizer(model_dir)
    cfg_dir = _tl_config_dir(hf_config)
    try:
        n_ctx = min(n_ctx, getattr(hf_config, "max_position_embeddings", n_ctx))
        cfg = loading.get_pretrained_model_config(
            str(cfg_dir),
            hf_cfg=hf_config.to_dict(),
            fold_ln=False,
            device=device,
            dtype=torch.float32,
            n_ctx=n_ctx,
        )
        info = {"tokenizer": tok_how, "tl_n_ctx": cfg.n_ctx, "tl_model_name": cfg.model_name}
        rope_theta = getattr(hf_config, "rope_theta", None)
        if cfg.positional_embedding_type == "rotary" and rope_theta is not None:
            if getattr(hf_config, "rope_scaling", None):
                raise NotImplementedError(f"rope_scaling {hf_config.rope_scaling} is not handled here")
            if float(cfg.rotary_base) != float(rope_theta):
                info["rotary_base_fixed"] = {"tl_default": float(cfg.rotary_base), "hf_rope_theta": float(rope_theta)}
                cfg.rotary_base = float(rope_theta)
        state = loading.get_pretrained_state_dict(str(cfg_dir), cfg, hf_model, dtype=torch.float32)
    finally:
        shutil.rmtree(cfg_dir.parent)
    model = TransformerLensReplacementModel(cfg, tokenizer, move_to_device=False)
    # HookedTransformer.from_pretrained's processing, with circuit-tracer's overrides (no folding or centring)
    model.load_and_process_state_dict(
        state,
        fold_ln=False,
        center_writing_weights=False,
        center_unembed=False,
        fold_value_biases=True,
        refactor_factored_attn_matrices=False,
    )
    model.move_model_modules_to_device()
    model._configure_replacement_model(transcoders)  # what from_pretrained_and_transcoders does after loading
    return model, hf_model, info


# --------------------------------------------------------------------------------------------------------------
# circuit-tracer's own consistency check, re-run on the graph (frozen interventions)
# --------------------------------------------------------------------------------------------------------------


def frozen_intervention_check(model, graph, error_vectors, token_vectors, n_samples: int = 16, seed: int = 0):
    """Max |observed change - adjacency column| over sampled error, token and feature nodes, in a model whose
    attention patterns, norm scales and MLP outputs are frozen (see the module docstring).

    The freeze is circuit-tracer's `setup_intervention_with_freeze` with every layer constrained (with skip
    transcoders it leaves the MLP inputs live and adds skip(input now) - skip(input then) to the frozen outputs, so
    the skip path stays linear as in the graph); the feature interventions are its `feature_intervention`."""
    import torch

    g = torch.Generator().manual_seed(seed)
    s = graph.input_tokens
    n_layers, n_pos = model.cfg.n_layers, len(s)
    A = graph.adjacency_matrix
    feats = graph.active_features[graph.selected_features]
    n_sel = len(feats)
    logit_ids = graph.logit_token_ids
    n_log = len(logit_ids)
    err0, tok0 = n_sel, n_sel + n_layers * n_pos

    def pre_activation_hooks(store):
        def make(layer):
            def hook(acts, hook):
                store[layer] = model.transcoders.encode_layer(acts, layer, apply_activation_function=False)[0]

            return hook

        return [(f"blocks.{layer}.{model.feature_input_hook}", make(layer)) for layer in range(n_layers)]

    def readout(logits, pre):
        last = logits.squeeze(0)[-1]
        return pre[feats[:, 0], feats[:, 1], feats[:, 2]], last[logit_ids] - last.mean()

    _, freeze = model.setup_intervention_with_freeze(s, constrained_layers=range(n_layers))

    @torch.no_grad()
    def observe(extra):
        store = [None] * n_layers
        logits = model.run_with_hooks(s, fwd_hooks=[*pre_activation_hooks(store), *freeze, *extra])
        return readout(logits, torch.stack(store))

    base_f, base_l = observe([])
    worst = {"feature_targets": 0.0, "logit_targets": 0.0}
    scale = {"feature_targets": 0.0, "logit_targets": 0.0}
    counts = {"error": 0, "token": 0, "feature": 0}

    def compare(col, new_f, new_l):
        exp_f, exp_l = A[:n_sel, col], A[-n_log:, col]
        worst["feature_targets"] = max(worst["feature_targets"], (new_f - base_f - exp_f).abs().max().item())
        worst["logit_targets"] = max(worst["logit_targets"], (new_l - base_l - exp_l).abs().max().item())
        scale["feature_targets"] = max(scale["feature_targets"], exp_f.abs().max().item())
        scale["logit_targets"] = max(scale["logit_targets"], exp_l.abs().max().item())

    def add_at(vec, pos):
        def hook(acts, hook):
            acts = acts.clone()
            acts[:, pos] += vec
            return acts

        return hook

    errs = [(layer, pos) for layer in range(n_layers) for pos in range(1, n_pos)]
    for i in torch.randperm(len(errs), generator=g)[:n_samples].tolist():
        layer, pos = errs[i]
        hook = (f"blocks.{layer}.{model.feature_output_hook}", add_at(error_vectors[layer, pos], pos))
        compare(err0 + layer * n_pos + pos, *observe([hook]))
        counts["error"] += 1
    for pos in torch.randperm(n_pos - 1, generator=g)[:n_samples].add(1).tolist():
        compare(tok0 + pos, *observe([("hook_embed", add_at(token_vectors[pos], pos))]))
        counts["token"] += 1
    for node in torch.randperm(n_sel, generator=g)[:n_samples].tolist():
        layer, pos, idx = feats[node].tolist()
        act = graph.activation_values[graph.selected_features[node]].item()
        logits, pre = model.feature_intervention(
            s, [(layer, pos, idx, 2 * act)], constrained_layers=range(n_layers), apply_activation_function=False
        )
        compare(node, *readout(logits, pre))
        counts["feature"] += 1
    return {"max_abs_deviation": worst, "max_abs_expected": scale, "n_nodes_checked": counts}


# --------------------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------------------


def node_ordering(n_sel: int, n_layers: int, n_pos: int, n_logits: int) -> dict:
    e0, t0 = n_sel, n_sel + n_layers * n_pos
    l0 = t0 + n_pos
    return {
        "convention": "circuit-tracer Graph: adjacency_matrix[target, source]; nodes ordered "
        "[feature nodes, error nodes (layer-major), token nodes, logit nodes]",
        "n_nodes": l0 + n_logits,
        "blocks": [
            {"kind": "feature", "start": 0, "stop": e0, "index": "node i = active_features[selected_features[i]]"},
            {"kind": "error", "start": e0, "stop": t0, "index": f"node {e0} + layer * {n_pos} + position"},
            {"kind": "token", "start": t0, "stop": l0, "index": f"node {t0} + position"},
            {"kind": "logit", "start": l0, "stop": l0 + n_logits, "index": f"node {l0} + k for logit_targets[k]"},
        ],
        "rows": "feature rows: effect on the feature's pre-activation; logit rows: effect on logit[t] - "
        "mean(logits) at the last position; error and token rows are zero; logit columns are zero",
        "sources": "feature: activation * decoder (every decoder layer for a CLT); error: MLP output minus the "
        "transcoder reconstruction at (layer, position); token: the embedding row at position",
        "position_zero": "no features and a zero error vector at position 0 (circuit-tracer's zero_positions)",
        "active_features_order": "lexicographic in (layer, position, feature_idx) (a coalesced sparse tensor)",
    }


def run(args) -> dict:
    import importlib.metadata as md

    import torch
    from circuit_tracer import attribute
    from circuit_tracer.graph import Graph, compute_graph_scores, prune_graph
    from safetensors.torch import save_file

    t_start = time.time()
    timings = {}
    model_dir, tc_dir, out = Path(args.model), Path(args.transcoders), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    if args.random_transcoders:
        mcfg = json.loads((model_dir / "config.json").read_text())
        write_random_transcoders(
            tc_dir,
            args.random_transcoders,
            n_layers=mcfg["num_hidden_layers"],
            d_model=mcfg["hidden_size"],
            d_tc=args.d_tc,
            seed=args.seed,
            active_frac=args.active_frac,
        )

    t = time.time()
    transcoders, tc_cfg = load_transcoders_local(tc_dir)
    model, hf_model, build_info = build_replacement_model(model_dir, transcoders, n_ctx=args.n_ctx)
    timings["load"] = time.time() - t

    prompt = [int(x) for x in args.token_ids.split(",")] if args.token_ids else args.prompt
    input_ids = model.ensure_tokenized(prompt)
    with torch.no_grad():
        tl_logits = model(input_ids[None]).squeeze(0)
        hf_logits = hf_model(input_ids[None]).logits.squeeze(0)
    hf_tl = (tl_logits - hf_logits).abs().max().item()
    del hf_model
    if hf_tl > args.logit_tol:
        raise SystemExit(f"HF vs TL logits differ by {hf_tl:.3g} > --logit-tol {args.logit_tol}")

    t = time.time()
    graph = attribute(
        prompt,
        model,
        max_n_logits=args.max_n_logits,
        desired_logit_prob=args.desired_logit_prob,
        batch_size=args.batch_size,
        max_feature_nodes=args.max_feature_nodes,
        offload=None,
        verbose=args.verbose,
    )
    timings["attribute"] = time.time() - t
    assert torch.equal(graph.input_tokens.cpu(), input_ids.cpu())

    t = time.time()
    pruned = prune_graph(graph, node_threshold=args.node_threshold, edge_threshold=args.edge_threshold)
    timings["prune_graph"] = time.time() - t
    t = time.time()
    replacement, completeness = compute_graph_scores(graph)
    timings["compute_graph_scores"] = time.time() - t
    kept = pruned.edge_mask & pruned.node_mask[:, None] & pruned.node_mask[None, :]
    pruned_graph = Graph(
        input_string=graph.input_string,
        input_tokens=graph.input_tokens,
        active_features=graph.active_features,
        adjacency_matrix=graph.adjacency_matrix * kept,
        cfg=graph.cfg,
        selected_features=graph.selected_features,
        activation_values=graph.activation_values,
        logit_targets=graph.logit_targets,
        logit_probabilities=graph.logit_probabilities,
        scan=graph.scan,
        vocab_size=graph.vocab_size,
    )
    p_replacement, p_completeness = compute_graph_scores(pruned_graph)

    with torch.no_grad():
        ctx = model.setup_attribution(input_ids)
    error_vectors, token_vectors = ctx.error_vectors.detach(), ctx.token_vectors.detach()
    t = time.time()
    check = (
        frozen_intervention_check(model, graph, error_vectors, token_vectors, args.check_samples, args.seed)
        if args.check_samples > 0
        else {"skipped": "--check-samples 0"}
    )
    timings["self_check"] = time.time() - t

    n_layers, n_pos = model.cfg.n_layers, len(graph.input_tokens)
    n_sel, n_logits = len(graph.selected_features), len(graph.logit_targets)
    tensors = {
        "adjacency_matrix": graph.adjacency_matrix.float(),
        "active_features": graph.active_features.long(),
        "activation_values": graph.activation_values.float(),
        "selected_features": graph.selected_features.long(),
        "input_tokens": graph.input_tokens.long(),
        "logit_token_ids": graph.logit_token_ids.long(),
        "logit_probabilities": graph.logit_probabilities.float(),
        "node_mask": pruned.node_mask,
        "edge_mask": pruned.edge_mask,
        "cumulative_scores": pruned.cumulative_scores.float(),
        "error_vectors": error_vectors.float(),
        "token_vectors": token_vectors.float(),
        "logits": tl_logits.float(),
    }
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(out / "graph.safetensors"))
    timings["total"] = time.time() - t_start

    versions = {p: md.version(p) for p in ("circuit-tracer", "torch", "transformers", "transformer-lens")}
    meta = {
        "referee": "circuit-tracer attribute() (TransformerLens backend)",
        "versions": versions,
        "model_dir": str(model_dir.resolve()),
        "transcoders_dir": str(tc_dir.resolve()),
        "transcoders": {
            "model_kind": tc_cfg["model_kind"],
            "feature_input_hook": model.feature_input_hook,
            "feature_output_hook": model.original_feature_output_hook,
            "scan": graph.scan,
            "d_transcoder": transcoders.d_transcoder,
            "skip_connection": bool(model.skip_transcoder),
        },
        "model": {**build_info, "n_layers": n_layers, "d_model": model.cfg.d_model, "d_vocab": model.cfg.d_vocab},
        "prompt": args.prompt,
        "prompt_token_ids": [int(x) for x in args.token_ids.split(",")] if args.token_ids else None,
        "input_string": graph.input_string,
        "input_tokens": graph.input_tokens.tolist(),
        "input_token_strings": [model.tokenizer.decode([i]) for i in graph.input_tokens.tolist()],
        "attribute_kwargs": {
            "max_n_logits": args.max_n_logits,
            "desired_logit_prob": args.desired_logit_prob,
            "batch_size": args.batch_size,
            "max_feature_nodes": args.max_feature_nodes,
            "offload": None,
            "device": "cpu",
        },
        "counts": {
            "n_pos": n_pos,
            "n_layers": n_layers,
            "n_active_features": len(graph.active_features),
            "n_selected_features": n_sel,
            "n_error_nodes": n_layers * n_pos,
            "n_token_nodes": n_pos,
            "n_logit_nodes": n_logits,
            "n_nodes": graph.adjacency_matrix.shape[0],
            "n_nonzero_edges": int((graph.adjacency_matrix != 0).sum()),
        },
        "node_ordering": node_ordering(n_sel, n_layers, n_pos, n_logits),
        "logit_targets": [
            {"token_str": lt.token_str, "vocab_idx": int(lt.vocab_idx), "probability": float(p)}
            for lt, p in zip(graph.logit_targets, graph.logit_probabilities.tolist())
        ],
        "scores": {
            "replacement": replacement,
            "completeness": completeness,
            "pruned_replacement": p_replacement,
            "pruned_completeness": p_completeness,
            "pruned_note": "compute_graph_scores on the adjacency with prune_graph's edge and node masks applied",
        },
        "prune": {
            "node_threshold": args.node_threshold,
            "edge_threshold": args.edge_threshold,
            "nodes_kept": int(pruned.node_mask.sum()),
            "features_kept": int(pruned.node_mask[:n_sel].sum()),
            "edges_kept": int(kept.sum()),
        },
        "hf_vs_tl_max_abs_logit_diff": hf_tl,
        "self_check": check,
        "threads": torch.get_num_threads(),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
    }
    (out / "graph.json").write_text(json.dumps(meta, indent=1))
    return meta


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="HF model folder (config.json, *.safetensors, tokenizer)")
    p.add_argument("--transcoders", required=True, help="transcoder folder (config.yaml + safetensors)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text (tokenized without special tokens; a BOS is prepended)")
    src.add_argument("--token-ids", help="comma-separated token ids instead of --prompt")
    p.add_argument("--out", required=True, help="output folder (graph.safetensors, graph.json)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-n-logits", type=int, default=10)
    p.add_argument("--desired-logit-prob", type=float, default=0.95)
    p.add_argument("--max-feature-nodes", type=int, default=None)
    p.add_argument("--node-threshold", type=float, default=0.8)
    p.add_argument("--edge-threshold", type=float, default=0.98)
    p.add_argument("--n-ctx", type=int, default=1024, help="TL context size (attention mask / rotary tables)")
    p.add_argument("--logit-tol", type=float, default=1e-3, help="max allowed |HF - TL| logit difference")
    p.add_argument("--check-samples", type=int, default=16, help="nodes of each kind re-checked; 0 skips")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--random-transcoders", choices=["plt", "skip", "clt"], help="first write random transcoders there")
    p.add_argument("--d-tc", type=int, default=256, help="width of --random-transcoders")
    p.add_argument("--active-frac", type=float, default=0.05, help="firing rate of --random-transcoders")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    return p.parse_args(argv)


def main(argv=None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    meta = run(args)
    summary = {k: meta[k] for k in ("counts", "scores", "hf_vs_tl_max_abs_logit_diff", "self_check", "timings_s")}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
