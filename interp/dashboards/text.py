"""Run your own text: every feature's activations on a text you type, as a page or a notebook cell.

`hook_activations(model, hook, text)` runs the model on the text (the one step that needs the model)
and returns the token ids, the hook's rows and their positions; an `encode` callable turns the rows into
feature activations. `TextView` shows the features that fire most on the text, each with the text
shaded by its activation, and on hover over any token the features most active there.
Special rows (the shared rule) are shown greyed out and carry no activations, as in the statistics.

    >>> ids, x, pos = hook_activations(model, "blocks.15.hook_resid_post", "The cat sat on the mat.")
    >>> TextView(ids, sae.encode(x), Vocab(model.tokenizer), keep=filt.keep_tensor(x, pos))   # shows inline
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from interp.dashboards.page import CSS, esc, page_html, token_html
from interp.dashboards.tokens import Vocab


@torch.no_grad()
def hook_activations(model: Any, hook: str, text: str) -> tuple[Tensor, Tensor, Tensor]:
    """(token ids [T], hook rows [T, d], positions [T]) of `text` (with the tokenizer's BOS if it adds one)."""
    if not text:
        raise ValueError("--text is empty: give the text to run, e.g. --text 'The cat sat on the mat.'")
    ids = model.to_tokens(text).reshape(1, -1)
    _, cache = model.run_with_cache(ids, names=[hook], return_logits=False)
    x = cache[hook][0].float()
    if x.dim() != 2:
        raise ValueError(f"{hook} rows have shape {list(x.shape[1:])}; a dashboard needs one vector per token")
    return ids[0].long(), x, torch.arange(len(ids[0]))


class TextView:
    """Features' activations on one text. `z` [T, F]; `keep` [T] marks ordinary (non-special) rows.

    `dense` [F] (bool; e.g. firing frequency above the dashboard's dense threshold on the store's rows)
    ranks dense features after all others, as the index does: a feature lit on almost every token tops a
    by-max list and says nothing about this text. They are shown in their own section."""

    def __init__(
        self,
        ids: Tensor,
        z: Tensor,
        vocab: Vocab,
        keep: Tensor | None = None,
        n_features: int = 12,
        link: Callable[[int], str | None] | None = None,
        note: str = "",
        dense: Tensor | None = None,
    ):
        self.ids, self.vocab, self.link, self.note = ids.tolist(), vocab, link, note
        self.keep = torch.ones(len(self.ids), dtype=torch.bool) if keep is None else keep.bool()
        self.z = torch.where(self.keep[:, None], z.float(), torch.zeros(()))
        peak = self.z.max(0).values
        self.dense = torch.zeros(len(peak), dtype=torch.bool) if dense is None else dense.bool().cpu()
        live = (peak > 0).nonzero().flatten()
        order = sorted(live.tolist(), key=lambda f: (bool(self.dense[f]), -float(peak[f]), f))
        self.features = order[:n_features]

    def _tokens(self) -> dict[str, list[str]]:
        return {str(i): [self.vocab.show(i), self.vocab.text(i), self.vocab.title(i)] for i in set(self.ids)}

    def _line(self, f: int | None, toks: dict[str, list[str]]) -> str:
        scale = float(self.z[:, f].max()) if f is not None else 0.0
        spans = []
        for t, (tid, kept) in enumerate(zip(self.ids, self.keep.tolist())):
            if not kept:
                spans.append(token_html(tid, toks, "special row (excluded by the row rule)", "t", "color:#aaa"))
                continue
            zt = self.z[t]
            best = zt.topk(min(5, zt.numel()))
            hover = "top features here: " + ", ".join(
                f"{int(g)} ({float(v):.3g})" for v, g in zip(best.values, best.indices) if v > 0
            )
            style = ""
            if f is not None:
                v = float(zt[f])
                hover = f"feature {f}: {v:.4g} · " + hover
                if v > 0 and scale > 0:
                    style = f"background:rgba(255,120,0,{min(1.0, v / scale):.3f})"
            spans.append(token_html(tid, toks, hover, "t", style))
        return f'<div class="ctx">{"".join(spans)}</div>'

    def fragment(self) -> str:
        toks = self._tokens()
        p = ['<div class="idash"><h2>Your text</h2>']
        if self.note:
            p.append(f'<p class="muted">{esc(self.note)}</p>')
        p.append(self._line(None, toks))
        main = [f for f in self.features if not self.dense[f]]
        dense = [f for f in self.features if self.dense[f]]
        p.append(f"<h3>Features most active on it ({len(main)})</h3>")
        if not self.features:
            p.append('<p class="none">no feature fires on this text</p>')
        p.append(self._table(main, toks))
        if dense:
            p.append(f'<h3>Dense features ({len(dense)}) <span class="muted">(fire on most tokens)</span></h3>')
            p.append(self._table(dense, toks))
        p.append("</div>")
        return "".join(p)

    def _table(self, feats: list[int], toks: dict[str, list[str]]) -> str:
        p = ["<table><tr><th>feature</th><th>max</th><th>tokens</th></tr>"]
        for f in feats:
            href = self.link(f) if self.link else None
            name = f'<a href="{esc(href)}">{f}</a>' if href else str(f)
            p.append(
                f"<tr><td>{name}</td><td "
                f'class="num">{float(self.z[:, f].max()):.3g}</td><td>{self._line(f, toks)}</td></tr>'
            )
        p.append("</table>")
        return "".join(p)

    def _repr_html_(self) -> str:
        return f"<style>{CSS}</style>" + self.fragment()

    def html(self) -> str:
        return page_html(self.fragment(), "Your text")

    def top(self, k: int = 5) -> list[tuple[int, float]]:
        """The k features with the highest activation on the text: (feature, max)."""
        return [(f, float(self.z[:, f].max())) for f in self.features[:k]]
