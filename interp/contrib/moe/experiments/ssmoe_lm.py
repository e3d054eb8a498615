"""SSMoE on a pretrained MoE language model: next-token loss and expert load with the spectral router mixed in.

    python -m interp.contrib.moe.experiments.ssmoe_lm --model allenai/OLMoE-1B-7B-0924 \
        [--layers all|0,3,...] [--c 0.3 0.5] [--k 4] [--data stdlib-docs] [--max-tokens 4096] [--ctx-len 128]

MODEL is anything `interp.load_model` takes: a hub id, a local HF folder, a registered name. For each chosen
MoE layer the experts' gate/up/down weights and the router row of every expert are read from the HF block
(OLMoE, Qwen3-MoE, Mixtral: one small function per block type, `EXTRACTORS`), the SSMoE directions are built
once (`SSMoERouter.from_experts`, top-`k` singular vectors per matrix), and during a forward the block's router
(`mlp.gate`) returns the SSMoE mixed routing (1 - c) softmax(router) + c softmax(spectral) with the block's own
top-k and normalisation (`norm_topk_prob` for OLMoE and Qwen3-MoE; Mixtral always renormalises). The model's
own router logits are still returned, so `hook_router_logits` reads them while `hook_expert_indices` /
`hook_expert_weights` read the mixed choice.

Reports, for c = 0 (the original router; checked to reproduce the unpatched model's logits, bit for bit on
CPU) and each `--c`: mean next-token cross-entropy over the corpus rows and each chosen layer's normalised
expert-load entropy (1 = uniform, 0 = one expert) over every (token, slot) assignment. Prints Markdown tables
and returns a dict.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.moe.ssmoe import SSMoERouter, expert_load, load_entropy, mixed_routing, ssmoe_logits
from interp.contrib.report import fmt, markdown_table


@dataclass
class MoELayer:
    """One sparse MoE block of a HF model, with what SSMoE needs from it."""

    layer: int
    block_type: str  # the HF class name, e.g. "OlmoeSparseMoeBlock"
    gate: nn.Module  # the router module whose forward is swapped
    gate_w: Tensor  # [n_experts, d_hidden, d_model]
    up_w: Tensor  # [n_experts, d_hidden, d_model]
    down_w: Tensor  # [n_experts, d_model, d_hidden]
    router_w: Tensor  # [n_experts, d_model]
    top_k: int
    normalize: bool  # renormalise the kept top-k weights to sum to one
    scores_in_logits_dtype: bool  # the router casts its top-k weights to the logits' dtype (OLMoE, Qwen3-MoE)

    @property
    def n_experts(self) -> int:
        return self.router_w.shape[0]

    def ssmoe(self, k: int, c: float = 0.5, signed: bool = True) -> SSMoERouter:
        return SSMoERouter.from_experts(self.gate_w, self.up_w, self.down_w, self.router_w, k=k, c=c, signed=signed)


def _fused_swiglu(block: nn.Module, model_type: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(gate_w, up_w, down_w, router_w) of transformers 5's fused expert storage: `experts.gate_up_proj`
    [E, 2h, d], read in the experts' forward as `gate, up = linear(x, gate_up_proj[e]).chunk(2, -1)` (gate
    first), `experts.down_proj` [E, d, h], and the router `gate.weight` [E, d]."""
    experts, gate = getattr(block, "experts", None), getattr(block, "gate", None)
    gate_up, down = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
    if not isinstance(gate_up, Tensor) or not isinstance(down, Tensor) or not isinstance(gate, nn.Module):
        raise ValueError(
            f"{model_type}: {type(block).__name__} does not store its experts as experts.gate_up_proj "
            "[E, 2h, d] and experts.down_proj [E, d, h] with a router gate.weight [E, d] (transformers 5's layout); "
            "this transformers version lays them out differently: add its layout to EXTRACTORS in "
            "interp/contrib/moe/experiments/ssmoe_lm.py"
        )
    gate_w, up_w = gate_up.detach().chunk(2, dim=1)
    return gate_w, up_w, down.detach(), gate.weight.detach()


def extract_olmoe(block: nn.Module, layer: int, model_type: str) -> MoELayer:
    """OLMoE (`OlmoeSparseMoeBlock`): softmax, top-k, renormalised when `norm_topk_prob`, cast to the logits' dtype."""
    g, u, d, r = _fused_swiglu(block, model_type)
    gate = block.gate
    return MoELayer(layer, type(block).__name__, gate, g, u, d, r, gate.top_k, bool(gate.norm_topk_prob), True)


def extract_qwen3_moe(block: nn.Module, layer: int, model_type: str) -> MoELayer:
    """Qwen3-MoE (`Qwen3MoeSparseMoeBlock`): the same router convention as OLMoE (`norm_topk_prob`)."""
    g, u, d, r = _fused_swiglu(block, model_type)
    gate = block.gate
    return MoELayer(layer, type(block).__name__, gate, g, u, d, r, gate.top_k, bool(gate.norm_topk_prob), True)


def extract_mixtral(block: nn.Module, layer: int, model_type: str) -> MoELayer:
    """Mixtral (`MixtralSparseMoeBlock`): top-k always renormalised, weights left in float32."""
    g, u, d, r = _fused_swiglu(block, model_type)
    gate = block.gate
    return MoELayer(layer, type(block).__name__, gate, g, u, d, r, gate.top_k, True, False)


EXTRACTORS: dict[str, Callable[[nn.Module, int, str], MoELayer]] = {
    "OlmoeSparseMoeBlock": extract_olmoe,
    "Qwen3MoeSparseMoeBlock": extract_qwen3_moe,
    "MixtralSparseMoeBlock": extract_mixtral,
}
"""HF sparse-MoE block class name -> the function that reads its experts and router convention."""

SUPPORTED = "OLMoE (OlmoeSparseMoeBlock), Qwen3-MoE (Qwen3MoeSparseMoeBlock), Mixtral (MixtralSparseMoeBlock)"


def _looks_moe(module: nn.Module) -> bool:
    return hasattr(module, "experts") or "moe" in type(module).__name__.lower()


def moe_layers(model, layers: str | Sequence[int] = "all") -> list[MoELayer]:
    """The chosen sparse-MoE layers of a `HookedModel` ("all": every layer whose MLP is a supported MoE block).

    A dense model, an MoE block type without an extractor, or a named layer that is not a MoE layer is a
    `ValueError` that says which."""
    a, hf = model.adapter, model.hf_model
    model_type = hf.config.model_type
    blocks = [hf.get_submodule(f"{a.layers}.{i}").get_submodule(a.mlp_contrib) for i in range(model.n_layers)]
    kinds = [type(b).__name__ for b in blocks]
    if not any(k in EXTRACTORS for k in kinds):
        seen = ", ".join(sorted(set(kinds)))
        if any(_looks_moe(b) for b in blocks):
            raise ValueError(
                f"model type {model_type!r}: its MoE block ({seen}) is not supported by SSMoE here; supported: "
                f"{SUPPORTED}. Add an extractor to EXTRACTORS in interp/contrib/moe/experiments/ssmoe_lm.py"
            )
        raise ValueError(
            f"model type {model_type!r} has no mixture-of-experts layers (its MLPs are {seen}): SSMoE re-routes "
            f"a sparse MoE's experts, so it needs an MoE model: {SUPPORTED}"
        )
    if isinstance(layers, str):
        if layers.strip() == "all":
            chosen = [i for i, k in enumerate(kinds) if k in EXTRACTORS]
        else:
            try:
                chosen = [int(s) for s in layers.split(",") if s.strip()]
            except ValueError:
                raise ValueError(f"--layers {layers!r}: give 'all' or layer numbers separated by commas") from None
    else:
        chosen = [int(i) for i in layers]
    if not chosen:
        raise ValueError("no layers chosen: give 'all' or layer numbers separated by commas")
    out = []
    for i in dict.fromkeys(chosen):
        if not 0 <= i < model.n_layers:
            raise ValueError(f"layer {i} does not exist: {model_type!r} has layers 0..{model.n_layers - 1}")
        if kinds[i] not in EXTRACTORS:
            raise ValueError(f"layer {i} of {model_type!r} is not a supported MoE layer (its MLP is {kinds[i]})")
        out.append(EXTRACTORS[kinds[i]](blocks[i], i, model_type))
    return out


def _mixed_forward(moe: MoELayer, router: SSMoERouter) -> Callable:
    """A router forward with the original's signature and outputs (logits, top-k weights, top-k indices)."""
    weight, d = moe.router_w, moe.router_w.shape[1]

    def forward(hidden_states: Tensor):
        x = hidden_states.reshape(-1, d)
        logits = F.linear(x, weight)
        weights, experts = mixed_routing(logits, ssmoe_logits(x, router.directions), router.c, moe.top_k, moe.normalize)
        if moe.scores_in_logits_dtype:
            weights = weights.to(logits.dtype)
        return logits, weights, experts

    return forward


@contextmanager
def ssmoe_routing(moes: Sequence[MoELayer], routers: Sequence[SSMoERouter]) -> Iterator[None]:
    """Inside the block, each layer's router returns the SSMoE mixed routing of its `SSMoERouter` (c = 0: the
    original routing). The routers' own forwards are restored in `finally`, also when the block raises."""
    if len(moes) != len(routers):
        raise ValueError(f"{len(moes)} MoE layers but {len(routers)} SSMoE routers: give one router per layer")
    swapped: list[tuple[nn.Module, bool, object]] = []
    try:
        for moe, router in zip(moes, routers):
            had = "forward" in moe.gate.__dict__
            swapped.append((moe.gate, had, moe.gate.__dict__.get("forward")))
            moe.gate.forward = _mixed_forward(moe, router)
        yield
    finally:
        for gate, had, old in reversed(swapped):
            if had:
                gate.forward = old
            else:
                del gate.forward


def _run(model, tokens: Tensor, names: list[str]) -> tuple[Tensor, dict[str, Tensor]]:
    """(logits, the named router outputs) of one forward."""
    logits, cache = model.run_with_cache(tokens, names=names)
    return logits, {n: cache[n] for n in names}


C0_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 2e-3}
"""Off CPU, the largest |Δlogit| of c = 0 against the unpatched model allowed, relative to the largest |logit|."""


def _c0_check(got: Tensor, want: Tensor) -> float:
    """Max |Δlogit| of c = 0 against the unpatched model; raises unless they agree: bit for bit on CPU; on an
    accelerator within `C0_TOLERANCE` of the logits' scale, since its scatter-add kernels may sum the chosen
    experts in another order from one forward to the next (a routing difference moves logits far more)."""
    diff = float((got.float() - want.float()).abs().max())
    if got.device.type == "cpu":
        same = torch.equal(got, want)
    else:
        same = diff <= C0_TOLERANCE.get(got.dtype, 1e-4) * float(want.float().abs().max())
    if not same or math.isnan(diff):
        raise RuntimeError(
            f"c = 0 should reproduce the model's own logits, but they differ by up to {diff:.3g}: the swapped "
            "router does not follow this block's routing convention"
        )
    return diff


def evaluate(model, tokens: Tensor, moes: Sequence[MoELayer], k: int, cs: Sequence[float], batch_size: int = 8) -> dict:
    """Cross-entropy and per-layer load entropy for c = 0 and each c in `cs` (see the module docstring)."""
    cs = [0.0, *(c for c in dict.fromkeys(float(c) for c in cs) if c != 0.0)]
    base = [moe.ssmoe(k) for moe in moes]  # the directions, once per layer
    names = [f"blocks.{m.layer}.mlp.hook_expert_indices" for m in moes]
    nll = dict.fromkeys(cs, 0.0)
    chosen: dict[float, dict[int, list[Tensor]]] = {c: {m.layer: [] for m in moes} for c in cs}
    n_targets, c0_diff = 0, 0.0
    for i in range(0, len(tokens), batch_size):
        batch = tokens[i : i + batch_size].to(model.device)
        with torch.no_grad():
            ref = model(batch)  # the unpatched model
        for c in cs:
            with ssmoe_routing(moes, [replace(r, c=c) for r in base]):
                logits, cache = _run(model, batch, names)
            if c == 0.0:
                c0_diff = max(c0_diff, _c0_check(logits, ref))
            nll[c] += float(
                F.cross_entropy(
                    logits[:, :-1].flatten(0, 1).float(), batch[:, 1:].flatten().to(logits.device), reduction="sum"
                )
            )
            for m, name in zip(moes, names):
                chosen[c][m.layer].append(cache[name].flatten(0, -2).cpu())
        n_targets += batch[:, 1:].numel()
    rows = []
    for c in cs:
        ent = {m.layer: load_entropy(expert_load(torch.cat(chosen[c][m.layer]), m.n_experts)) for m in moes}
        rows.append(
            {
                "c": c,
                "cross_entropy": nll[c] / n_targets,
                "load_entropy": ent,
                "mean_load_entropy": sum(ent.values()) / len(ent),
            }
        )
    return {"rows": rows, "targets": n_targets, "c0_max_abs_logit_diff": c0_diff}


def unit_interval(text: str) -> float:
    """argparse type: a float in [0, 1] (the SSMoE mixing ratio)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"the mixing ratio c must lie in [0, 1]; got {text}")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = experiment_parser(
        __doc__,
        seeds=None,
        layers=("all", "MoE layers to re-route: 'all' or numbers separated by commas (0,3,...)"),
        k=(4, "singular vectors averaged per expert matrix"),
        data=("stdlib-docs", "corpus spec (`interp.data.resolve_corpus`)"),
        max_tokens=4096,
        ctx_len=128,
        batch_size=8,
        threads=1,
    )
    ap.add_argument("--model", required=True, help="a hub id, local HF folder or registered name (interp.load_model)")
    ap.add_argument(
        "--c",
        type=unit_interval,
        nargs="+",
        default=[0.3, 0.5],
        help="mixing ratios in [0, 1] besides c = 0 (the original router), which is always run",
    )
    ap.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (CUDA when present)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    return ap


def tables(res: dict) -> str:
    rows, layers = res["rows"], res["layers"]
    ce0 = rows[0]["cross_entropy"]
    summary = markdown_table(
        ["c", "cross-entropy", "Δ vs c=0", "mean load entropy", "min load entropy"],
        [
            [
                "0 (original)" if r["c"] == 0 else fmt(r["c"], 2),
                fmt(r["cross_entropy"], 4),
                fmt(r["cross_entropy"] - ce0, 4),
                fmt(r["mean_load_entropy"]),
                fmt(min(r["load_entropy"].values())),
            ]
            for r in rows
        ],
    )
    per_layer = markdown_table(
        ["layer", *(f"c={fmt(r['c'], 2)}" for r in rows)],
        [[str(layer), *(fmt(r["load_entropy"][layer]) for r in rows)] for layer in layers],
    )
    return f"{summary}\n\nLoad entropy per layer:\n\n{per_layer}"


def main(argv: list[str] | None = None) -> dict:
    import interp
    from interp.data import resolve_corpus

    ap = build_parser()
    args = parse(ap, argv)
    t0 = time.time()
    try:
        model = interp.load_model(args.model, device=args.device, dtype=args.dtype)
        moes = moe_layers(model, args.layers)
        corpus = resolve_corpus(args.data, model.tokenizer, ctx_len=args.ctx_len, max_tokens=args.max_tokens, seed=0)
        if corpus.n_seq == 0 or args.ctx_len < 2:
            raise ValueError(f"--max-tokens {args.max_tokens} / --ctx-len {args.ctx_len} leave no corpus rows")
        h, d = moes[0].gate_w.shape[1:]
        if args.k > min(h, d):
            raise ValueError(f"--k {args.k} must be at most min(d_hidden, d_model) = {min(h, d)}")
    except (ValueError, FileNotFoundError) as exc:
        ap.error(str(exc))
    out = evaluate(model, corpus.tokens, moes, args.k, args.c, args.batch_size)
    res = {
        "model": args.model,
        "model_type": model.config.model_type,
        "config": vars(args),
        "layers": [m.layer for m in moes],
        "block_type": moes[0].block_type,
        "corpus": {"source": corpus.source, "rows": corpus.n_seq, "ctx_len": corpus.ctx_len, "digest": corpus.digest()},
        **out,
        "seconds": round(time.time() - t0, 1),
    }
    print(f"SSMoE on {args.model} ({res['model_type']}), layers {res['layers']}, k={args.k}, {out['targets']} targets")
    print(f"c = 0 reproduces the model's logits: max |Δ| = {out['c0_max_abs_logit_diff']:.3g}\n")
    print(tables(res))
    return res


if __name__ == "__main__":
    main()
