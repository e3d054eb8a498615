"""Per-token ablation effects on a feature page's top windows: how the loss on the next token changes when
the feature's contribution is removed at one position (SAEDashboard's per-token "loss effect" on hover).

At position p of a sequence, the effect is CE(next token | hook output at p minus coef(x_p) * direction)
minus the clean CE, everything else unchanged. Removing the feature at all its firing positions in one
forward is not that: an ablation at an earlier position would change the later losses. So each position
gets its own batch row (one ablated position per row, at most `max_batch` rows per forward). The clean
tokens before the first ablated position run once, and their cached keys and values serve every row;
rows stop after the last token a loss needs (a causal model's loss at p does not see tokens after p + 1).
Windows of one sequence share their forwards.

    >>> next_token_loss_deltas(model, "blocks.1.hook_resid_post", ids, [3, 7], d, lambda x: x @ w_enc)
    {3: 0.412, 7: -0.05}
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from interp.wrapper.kv_cache import cache_kwarg, returned_cache


@torch.no_grad()
def next_token_loss_deltas(
    model: Any,
    hook: str,
    tokens: Tensor,
    positions: list[int],
    direction: Tensor,
    coef: Callable[[Tensor], Tensor],
    max_batch: int = 16,
) -> dict[int, float]:
    """{p: loss on token p+1 with the feature removed at p, minus the clean loss} for each p in `positions`
    that has a next token. `tokens` [T]: the ids the model reads (the sequence from its start); `direction`
    [d]: the feature's contribution per unit at `hook`; `coef(rows [n, d]) -> [n]`: the feature's value on
    hook rows. A position where the contribution is exactly zero gets 0.0.

    The tokens before the first position are run once (their keys and values cached, clean in every row);
    only the rest runs per batch row. Row j's hook row at its own position is still clean when the hook
    sees it (nothing before it changed), so its coefficient is read there."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    if not model.hook_points([hook]):
        raise ValueError(f"the model has no hook {hook!r}; its hooks look like {model.hook_names()[:3]}")
    T = len(tokens)
    ps = sorted({int(p) for p in positions if 0 <= int(p) < T - 1})
    if not ps:
        return {}
    ids = tokens[: ps[-1] + 2].long().reshape(1, -1).to(model.device)
    p0 = ps[0]
    hf = model.hf_model
    kw = cache_kwarg(hf)
    cache = None
    if p0 > 0:  # the clean prefix, once
        got = hf(input_ids=ids[:, :p0], use_cache=True)
        cache = returned_cache(got)
    suffix = ids[:, p0:]

    head = hf.get_output_embeddings()

    def run(rows: int, fn: Callable[[Tensor, Any], Any], at: Tensor) -> Tensor:
        """Logits [rows, len(at[0]), vocab] at suffix positions `at` [rows, n] only (the unembedding is
        the costly part of such short rows: it sees just the positions whose loss is wanted)."""
        past = None
        if cache is not None:
            past = copy.deepcopy(cache)
            if rows > 1:
                past.batch_repeat_interleave(rows)
        r = torch.arange(rows, device=at.device)[:, None]
        gather = head.register_forward_pre_hook(lambda _m, args: (args[0][r, at],) + tuple(args[1:]))
        try:
            with model.hooks(fwd_hooks=[(hook, fn)]):
                return hf(input_ids=suffix.expand(rows, -1), use_cache=True, **{kw: past}).logits
        finally:
            gather.remove()

    seen: dict[str, Tensor] = {}

    def save(t: Tensor, _hook: Any) -> None:
        seen["x"] = t.detach()

    rel_all = torch.tensor([p - p0 for p in ps], device=ids.device)
    logits = run(1, save, rel_all[None])[0]  # [len(ps), vocab]
    if "x" not in seen:
        raise RuntimeError(f"the forward never reached hook {hook!r}")
    x = seen["x"][0]
    if x.dim() != 2:
        raise ValueError(f"{hook} rows have shape {list(x.shape[1:])}; ablation needs one vector per token")
    d = direction.reshape(-1).to(device=x.device, dtype=torch.float32)
    if d.shape[0] != x.shape[1]:
        raise ValueError(f"direction has d={d.shape[0]} but {hook} rows have d={x.shape[1]}")
    nxt = suffix[0, 1:]
    ce_clean = torch.nn.functional.cross_entropy(logits.float(), nxt[rel_all], reduction="none")
    clean = dict(zip(ps, ce_clean.tolist()))
    a = coef(x[rel_all].float()).reshape(-1).float()
    out = {p: 0.0 for p, v in zip(ps, a.tolist()) if v == 0 or not bool(d.any())}
    todo = [p for p in ps if p not in out]
    for i in range(0, len(todo), max_batch):
        part = todo[i : i + max_batch]
        rel = torch.tensor([p - p0 for p in part], device=x.device)
        rows = torch.arange(len(part), device=x.device)

        def ablate(t: Tensor, _hook: Any, rel: Tensor = rel, rows: Tensor = rows) -> Tensor:
            t = t.clone()
            here = t[rows, rel].float()  # still clean: only this row's own position is ever changed
            t[rows, rel] = (here - coef(here).reshape(-1, 1).to(here.device, torch.float32) * d).to(t.dtype)
            return t

        lg = run(len(part), ablate, rel[:, None])[:, 0]
        ce = torch.nn.functional.cross_entropy(lg.float(), nxt[rel], reduction="none")
        out.update({p: float(c) - clean[p] for p, c in zip(part, ce.tolist())})
    return out


@dataclass
class WindowAblation:
    """Adds `ablation` (per token of the window: the next-token loss change, None where not computed) to the
    first `max_windows` top contexts of a record, and `ablation_model` to the record.

    `direction(f)` -> [d] and `coef(f, rows [n, d])` -> [n] describe feature f at `hook` (for an SAE latent:
    its decoder row in the hook's units and its encoder value). The model reads each window's sequence from
    its start, taken from the source's token ids; a window whose sequence start is not there is skipped. A
    row that stands for N identical windows (×N) gets the effects of the first, highest one."""

    model: Any
    hook: str
    direction: Callable[[int], Tensor]
    coef: Callable[[int, Tensor], Tensor]
    label: str = ""
    max_batch: int = 16
    max_windows: int = 20

    def annotate(self, rec: dict[str, Any], source: Any) -> None:
        f = int(rec["feature"])
        rec["ablation_model"] = self.label or "a model"
        ctxs = rec["top"][: self.max_windows]
        by_seq: dict[tuple[int, int], list[dict[str, Any]]] = {}
        for c in ctxs:
            c["ablation"] = [None] * len(c["tokens"])
            if c["target"] is not None:
                by_seq.setdefault((c["seq"], c["row"] - c["pos"]), []).append(c)
        if not by_seq:
            return
        d = self.direction(f)
        limit = len(source.store) if hasattr(source, "store") else source.n_rows
        for (seq, start), cs in by_seq.items():
            # sequence position of window token k: pos - target + k; one more token for the last one's loss
            end = min(max(c["pos"] - c["target"] + len(c["tokens"]) for c in cs) + 1, limit - start)
            if start < 0 or end < 1:
                continue
            got = source.tokens_of(torch.arange(start, start + end))
            same = (got["seq"] == seq) & (got["pos"] == torch.arange(len(got["pos"])))
            n = int(same.long().cumprod(0).sum())  # rows of this sequence from its start, in order
            seq_ids = got["tokens"][:n].tolist()
            # a window is contiguous in its sequence (checked: its ids must be the sequence's there)
            cs = [c for c in cs if seq_ids[c["pos"] - c["target"] :][: len(c["tokens"])] == list(c["tokens"])]
            if n == 0 or not cs:
                continue
            want = {
                c["pos"] - c["target"] + k for c in cs for k, v in enumerate(c["values"]) if v is not None and v > 0
            }
            delta = next_token_loss_deltas(
                self.model, self.hook, got["tokens"][:n], sorted(want), d, lambda x: self.coef(f, x), self.max_batch
            )
            for c in cs:
                base = c["pos"] - c["target"]
                c["ablation"] = [
                    round(delta[base + k], 6) if base + k in delta else None for k in range(len(c["tokens"]))
                ]
