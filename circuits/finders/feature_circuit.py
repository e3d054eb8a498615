"""Sparse feature circuits (Marks et al. 2024): nodes are dictionary latents at chosen hooks plus one error node each.

Each dictionary (an SAE, `circuits.model.dictionary`) is spliced into the model at its hook:

    f = encode(x), err = x - decode(f), and the hook's output is decode(f) + err

so the spliced model computes what the model computes (to float rounding), while every latent f_i and the error
err are now variables one can read, differentiate and patch. A node's score estimates the metric change when
that node alone is patched from the corrupted run (summed over positions, averaged over rows):

    eap     s(node) = sum_pos dm/d node (clean run) . (node(corrupt) - node(clean))
    eap-ig  the same with dm/d node averaged over k runs in which that hook's latents and error go on a straight
            line from their clean to their corrupted values (midpoints (i + 1/2) / k), one hook at a time, as
            Marks et al.'s integrated gradients do; per hook the scores then sum to the effect of patching the
            whole hook (completeness), which the test checks

The gradient pass uses a straight-through splice, decode(f) + err + (x - x.detach()), so the gradient reaching
each hook's f and err is the total derivative through every later hook (Marks et al. set x.grad to the splice
output's grad the same way). Edges u -> d between consecutive spliced hooks a < b are, for the top nodes only,

    e(u, d) = sum_pos d/du [ sum_pos' (dm/d d)(pos') . d(pos') ] . (u(corrupt) - u(clean))

at the clean run (one backward from d's attribution to hook a per downstream node; Marks et al.'s `jvp`), with
dm/d d the gradient the node scores used (the IG average for eap-ig). The error node is the last index of a
hook's score vector (index d_sae).

    scores = feature_scores(model, [d5, d10, d15], batch, method="eap", top_n=20)
    scores.top(30)                               # [(hook, index)] by |score|; index d_sae is the error node
    scores.to_json(pages={"blocks.15.hook_resid_post": dashboard_pages("runs/dash/topk0")})
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from circuits.finders.eap import _frozen
from circuits.model.dictionary import Dictionary
from circuits.tasks.metrics import Metric, check_metric, last, metric_rows
from circuits.tasks.pairs import PairBatch

ERRORS = ("rank", "keep", "ablate")


# ---------------------------------------------------------------------- the splice
def check_dictionaries(model, dicts: list) -> list:
    """The dictionaries sorted by layer; refuses unknown or repeated hooks and wrong widths, naming them."""
    if not dicts:
        raise ValueError("no dictionaries: give at least one SAE (--sae DIR)")
    names = set(model.hook_names())
    seen = set()
    for d in dicts:
        if not isinstance(d, Dictionary):
            raise TypeError(f"{d!r} is not a dictionary: it needs encode, decode, d_sae and hook")
        if d.hook not in names:
            raise ValueError(
                f"dictionary hook {d.hook!r} is not a hook point of this model; e.g. blocks.0.hook_resid_post"
            )
        d_in = getattr(d, "d_in", None)
        if d_in is not None and ".hook_resid_" in d.hook and d_in != model.d_model:
            raise ValueError(
                f"the dictionary at {d.hook} reads {d_in} channels but this model's residual stream has "
                f"{model.d_model}: was it trained on another model?"
            )
        if d.hook in seen:
            raise ValueError(f"two dictionaries at {d.hook}; give one per hook")
        seen.add(d.hook)
    return sorted(dicts, key=lambda d: layer_of(model, d.hook))


def layer_of(model, hook: str) -> int:
    layer = model.hook_points(hook)[0].layer
    if layer is None:
        raise ValueError(f"{hook} is outside the blocks; splice dictionaries at block hooks (blocks.L.hook_resid_post)")
    return int(layer)


def _dtype(d) -> torch.dtype:
    return getattr(d, "dtype", torch.float32)


def codes_of(d, x: Tensor) -> tuple[Tensor, Tensor]:
    """(codes, error) of activations x under dictionary d, in the dictionary's dtype (float32 unless it says)."""
    x = x.to(_dtype(d))
    f = d.encode(x)
    return f, x - d.decode(f)


def run_spliced(model, dicts: list, ids: Tensor, mask: Tensor, edit=None, record=None, stop_after: int | None = None):
    """One forward with every dictionary spliced in; returns the logits (or the residual after block `stop_after`).

    `edit(hook, f, err) -> (f, err)` changes the nodes before they are decoded (patching); `record[hook]` receives
    the (f, err) that were decoded. With neither, the output is the model's own up to rounding."""

    def make(d):
        def fn(x, hook):
            f, err = codes_of(d, x)
            if edit is not None:
                f, err = edit(d.hook, f, err)
            if record is not None:
                record[d.hook] = (f, err)
            return (d.decode(f) + err).to(x.dtype)

        return fn

    kw = {} if stop_after is None else {"stop_at_layer": stop_after + 1}
    with model.hooks(fwd_hooks=[(d.hook, make(d)) for d in dicts]):
        return model({"input_ids": ids, "attention_mask": mask}, **kw)


def _straight_through(model, dicts, ids, mask, leaves: dict):
    """The gradient pass: each hook outputs decode(f) + err + (x - x.detach()), f and err leaves (in `leaves`)."""

    def make(d):
        def fn(x, hook):
            f, err = codes_of(d, x.detach())
            f, err = f.detach().requires_grad_(True), err.detach().requires_grad_(True)
            leaves[d.hook] = (f, err)
            xd = x.to(_dtype(d))
            return (d.decode(f) + err + (xd - xd.detach())).to(x.dtype)

        return fn

    with model.hooks(fwd_hooks=[(d.hook, make(d)) for d in dicts]):
        return model({"input_ids": ids, "attention_mask": mask})


def _dot(grad: tuple[Tensor, Tensor], delta: tuple[Tensor, Tensor]) -> Tensor:
    """[d_sae + 1] sum over rows and positions of grad * delta, latents then the error node."""
    lat = (grad[0] * delta[0]).sum((0, 1))
    err = (grad[1] * delta[1]).sum()
    return torch.cat([lat, err[None]])


# ---------------------------------------------------------------------- scores
@dataclass
class FeatureScores:
    """Node scores [d_sae + 1] per hook (the last entry: the error node), edges between the top nodes."""

    hooks: list[str]
    scores: dict[str, Tensor]
    method: str
    metric: str
    edges: list[dict] = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def d_sae(self, hook: str) -> int:
        return self.scores[hook].numel() - 1

    def all_nodes(self, errors: str = "rank") -> list[tuple[str, int]]:
        """Every rankable node: all latents, plus the error nodes when errors == "rank"."""
        out = []
        for h in self.hooks:
            n = self.d_sae(h) + (1 if errors == "rank" else 0)
            out += [(h, i) for i in range(n)]
        return out

    def top(self, n: int, errors: str = "rank") -> list[tuple[str, int]]:
        """The n nodes of largest |score| over every hook (errors "rank": error nodes compete with latents)."""
        if errors not in ERRORS:
            raise ValueError(f"unknown error-node rule {errors!r}; use {', '.join(ERRORS)}")
        vals = torch.cat([self.scores[h][: self.d_sae(h) + (1 if errors == "rank" else 0)].abs() for h in self.hooks])
        order = torch.argsort(vals, descending=True, stable=True)[:n]
        nodes = self.all_nodes(errors)
        return [nodes[int(i)] for i in order]

    def top_per_hook(self, hook: str, n: int) -> list[int]:
        """The n nodes of `hook` (error node included) of largest |score|."""
        return [int(i) for i in torch.argsort(self.scores[hook].abs(), descending=True, stable=True)[:n]]

    def to_json(self, pages: dict[str, dict[int, str]] | None = None, top: int = 50) -> dict:
        """Nodes (the `top` per hook by |score|, with their dashboard page when known) and edges, as JSON."""
        pages = pages or {}
        nodes = []
        for h in self.hooks:
            d = self.d_sae(h)
            for i in self.top_per_hook(h, top):
                node = {"hook": h, "latent": "error" if i == d else i, "score": float(self.scores[h][i])}
                if i != d and i in pages.get(h, {}):
                    node["page"] = pages[h][i]
                nodes.append(node)
        return {
            "method": self.method,
            "metric": self.metric,
            "hooks": self.hooks,
            "nodes": nodes,
            "edges": self.edges,
            "error_scores": {h: float(self.scores[h][-1]) for h in self.hooks},
            "score_sums": {h: float(self.scores[h].sum()) for h in self.hooks},
            "info": self.info,
        }


def _records(model, dicts, sub: PairBatch) -> tuple[dict, dict, Tensor]:
    """(clean records, corrupted records, clean logits) of one sub-batch, hook -> (f, err)."""
    clean: dict = {}
    corrupt: dict = {}
    with torch.no_grad():
        logits = run_spliced(model, dicts, sub.clean, sub.clean_mask, record=clean)
        run_spliced(model, dicts, sub.corrupt, sub.corrupt_mask, record=corrupt)
    return clean, corrupt, logits


def _eap_grads(model, dicts, sub, metric, ref) -> dict:
    leaves: dict = {}
    with torch.enable_grad():
        logits = _straight_through(model, dicts, sub.clean, sub.clean_mask, leaves)
        metric_rows(logits, sub, metric, ref).sum().backward()
    return {h: (f.grad.detach(), e.grad.detach()) for h, (f, e) in leaves.items()}


def _ig_grads(model, dicts, sub, metric, ref, clean: dict, corrupt: dict, steps: int) -> dict:
    """Per hook, the gradient averaged over `steps` midpoints between its clean and corrupted nodes."""
    out = {}
    for d in dicts:
        fc, ec = clean[d.hook]
        fk, ek = corrupt[d.hook]
        g_f, g_e = torch.zeros_like(fc), torch.zeros_like(ec)
        for i in range(steps):
            alpha = (i + 0.5) / steps
            leaf: dict = {}

            def edit(hook, f, err, alpha=alpha, fc=fc, ec=ec, fk=fk, ek=ek, leaf=leaf):
                fa = (fc + alpha * (fk - fc)).requires_grad_(True)
                ea = (ec + alpha * (ek - ec)).requires_grad_(True)
                leaf["v"] = (fa, ea)
                return fa, ea

            with torch.enable_grad():
                logits = run_spliced(model, [d], sub.clean, sub.clean_mask, edit=edit)
                metric_rows(logits, sub, metric, ref).sum().backward()
            fa, ea = leaf["v"]
            g_f += fa.grad / steps
            g_e += ea.grad / steps
        out[d.hook] = (g_f, g_e)
    return out


def feature_scores(
    model,
    dicts: list,
    batch: PairBatch,
    metric: Metric = "logit-diff",
    method: str = "eap",
    ig_steps: int = 5,
    top_n: int = 20,
    batch_size: int = 16,
    edges: bool = True,
) -> FeatureScores:
    """Node scores of every latent and error node at every dictionary's hook, and edges between the top_n nodes
    per hook of consecutive hooks (bounded: top_n x top_n per pair of hooks)."""
    if method not in ("eap", "eap-ig"):
        raise ValueError(f"unknown method {method!r}; use eap or eap-ig")
    if ig_steps < 1 or top_n < 1:
        raise ValueError(f"ig_steps and top_n must be >= 1, got {ig_steps} and {top_n}")
    check_metric(metric, batch)
    if batch.corrupt is None or not batch.aligned:
        raise ValueError("feature attribution patches from the corrupted prompts: it needs aligned clean/corrupt pairs")
    dicts = check_dictionaries(model, dicts)
    hooks = [d.hook for d in dicts]
    t0 = time.perf_counter()
    scores = {d.hook: torch.zeros(d.d_sae + 1) for d in dicts}
    grads_kept = []
    clean_m = []
    with _frozen(model):
        for sub in batch.split(batch_size):
            sub = sub.to(model.device)
            clean, corrupt, logits = _records(model, dicts, sub)
            ref = last(logits, sub.clean_pos) if metric == "kl" else None
            clean_m.append(metric_rows(logits, sub, metric, ref))
            if method == "eap":
                grads = _eap_grads(model, dicts, sub, metric, ref)
            else:
                grads = _ig_grads(model, dicts, sub, metric, ref, clean, corrupt, ig_steps)
            for h in hooks:
                delta = (corrupt[h][0] - clean[h][0], corrupt[h][1] - clean[h][1])
                scores[h] += _dot(grads[h], delta).cpu()
            grads_kept.append({h: (g[0].cpu(), g[1].cpu()) for h, g in grads.items()})
        n = len(batch)
        for h in hooks:
            scores[h] /= n
        out = FeatureScores(hooks, scores, method, metric)
        if edges and len(dicts) > 1:
            out.edges = _edges(model, dicts, batch, out, grads_kept, top_n, batch_size)
    out.info = {
        "seconds": round(time.perf_counter() - t0, 3),
        "n_rows": len(batch),
        "clean_metric": float(torch.cat(clean_m).mean()),
        "top_n_per_hook": top_n,
        **({"ig_steps": ig_steps} if method == "eap-ig" else {}),
    }
    if method == "eap" and metric == "kl":
        out.info["warning"] = "KL's gradient is zero at the clean run: plain EAP scores are all ~0; use eap-ig"
    return out


def _edges(model, dicts, batch, scores: FeatureScores, grads_kept: list, top_n: int, batch_size: int) -> list[dict]:
    """Edge scores between the top_n nodes of consecutive hooks (see the module docstring)."""
    out = []
    for a, b in zip(dicts[:-1], dicts[1:]):
        ups = scores.top_per_hook(a.hook, top_n)
        downs = scores.top_per_hook(b.hook, top_n)
        total = torch.zeros(len(downs), a.d_sae + 1)
        for sub, grads in zip(batch.split(batch_size), grads_kept):
            sub = sub.to(model.device)
            clean, corrupt, _ = _records(model, [a], sub)
            delta = (corrupt[a.hook][0] - clean[a.hook][0], corrupt[a.hook][1] - clean[a.hook][1])
            leaf: dict = {}

            def edit(hook, f, err, leaf=leaf, up=a.hook):
                if hook == up:  # the leaves of hook a; hook b's nodes stay on the graph
                    f, err = f.detach().requires_grad_(True), err.detach().requires_grad_(True)
                leaf[hook] = (f, err)
                return f, err

            with torch.enable_grad():
                run_spliced(model, [a, b], sub.clean, sub.clean_mask, edit=edit, stop_after=layer_of(model, b.hook))
                fb, eb = leaf[b.hook]
                gf, ge = (g.to(fb.device) for g in grads[b.hook])
                for k, j in enumerate(downs):
                    s = (gf[..., j] * fb[..., j]).sum() if j < b.d_sae else (ge * eb).sum()
                    g = torch.autograd.grad(s, leaf[a.hook], retain_graph=True, allow_unused=True)
                    g = tuple(torch.zeros_like(v) if x is None else x for x, v in zip(g, leaf[a.hook]))
                    total[k] += _dot(g, delta).cpu()
        total /= len(batch)
        for k, j in enumerate(downs):
            for i in ups:
                out.append(
                    {
                        "up": {"hook": a.hook, "latent": "error" if i == a.d_sae else i},
                        "down": {"hook": b.hook, "latent": "error" if j == b.d_sae else j},
                        "score": float(total[k, i]),
                    }
                )
    return out
