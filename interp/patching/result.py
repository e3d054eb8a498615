"""`PatchResult`: the tensor a patching sweep returns, with named axes, labels and a plotly heatmap."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class PatchResult:
    """Metric values of a sweep: `values[layer, pos]`, `[layer, head]` or `[layer, pos, head]`.

    For activation patching each entry is the metric of the corrupted run with that one activation
    taken from the clean run; for attribution patching it is the first-order estimate of the same
    number (`baseline + (clean_act - corrupted_act) . d metric / d act`), so the two compare directly.
    """

    values: Tensor
    """The sweep, one entry per patched site."""
    dims: tuple[str, ...]
    """Axis names, e.g. ("layer", "pos")."""
    kind: str
    """What was patched: "resid_pre", "z", "k", ..., or "path:L3H1->L5H2.q"."""
    baseline: float
    """The metric on the corrupted input, nothing patched."""
    clean: float
    """The metric on the clean input."""
    labels: dict[str, list[str]] = field(default_factory=dict)
    """Tick labels per axis; "pos" labels are "position:token" (unique, so repeated tokens stay apart)."""
    method: str = "activation"
    """"activation", "attribution" or "path"."""

    def __post_init__(self):
        if self.values.ndim != len(self.dims):
            raise ValueError(f"values have {self.values.ndim} axes but dims name {len(self.dims)}: {self.dims}")

    @property
    def effect(self) -> Tensor:
        """values - baseline: how far each patch moves the metric."""
        return self.values - self.baseline

    def normalized(self) -> Tensor:
        """(values - baseline) / (clean - baseline): 0 = corrupted behaviour, 1 = clean behaviour restored."""
        span = self.clean - self.baseline
        if span == 0:
            raise ValueError("the metric is the same on the clean and corrupted inputs: nothing to normalise by")
        return self.effect / span

    def sum(self, dim: str) -> PatchResult:
        """Sum one named axis away (e.g. "head" of a [layer, pos, head] sweep), on the effects."""
        i = self.dims.index(dim)
        values = self.effect.sum(i) + self.baseline
        dims = self.dims[:i] + self.dims[i + 1 :]
        return PatchResult(
            values,
            dims,
            self.kind,
            self.baseline,
            self.clean,
            {k: v for k, v in self.labels.items() if k != dim},
            self.method,
        )

    def top(self, k: int = 5) -> list[tuple[str, float]]:
        """The k sites with the largest |effect|, as ("L23 H3", effect) or ("L3 pos5 ' John'", effect) pairs."""
        flat = self.effect.flatten()
        order = flat.abs().argsort(descending=True)[:k]
        out = []
        for i in order.tolist():
            idx = torch.unravel_index(torch.tensor(i), self.values.shape)
            name = " ".join(self._tick(d, int(j)) for d, j in zip(self.dims, idx))
            out.append((name, float(flat[i])))
        return out

    def _tick(self, dim: str, j: int) -> str:
        label = self.labels.get(dim, [])
        if dim == "pos":
            return f"pos {label[j] if j < len(label) else j}"
        return f"{dim[0].upper()}{label[j] if j < len(label) else j}"

    def heatmap(self, normalize: bool = True, title: str | None = None, **imshow_kwargs):
        """A plotly heatmap (2-D sweeps; sum an axis first for 3-D ones). Rows: layers."""
        import plotly.express as px

        if self.values.ndim != 2:
            raise ValueError(f"heatmap needs a 2-D sweep; this one is {self.dims}: call .sum('{self.dims[-1]}') first")
        z = (self.normalized() if normalize else self.values).detach().float().cpu().numpy()
        ydim, xdim = self.dims
        x = self.labels.get(xdim) or [str(i) for i in range(z.shape[1])]
        y = self.labels.get(ydim) or [str(i) for i in range(z.shape[0])]
        fig = px.imshow(
            z,
            x=[plotly_text(t) for t in x],  # token labels are data: a token like `<s>` must show, not act
            y=[plotly_text(t) for t in y],
            color_continuous_scale="RdBu",
            color_continuous_midpoint=0.0,
            labels={"x": xdim, "y": ydim, "color": "normalized metric" if normalize else "metric"},
            title=title or f"{self.method} patching: {self.kind}",  # the caller's own markup, if any
            aspect="auto",
            **imshow_kwargs,
        )
        return fig


def plotly_text(s: str) -> str:
    """A label as Plotly text: `<`, `>` and `&` escaped once. Plotly reads its text as markup, so a token such
    as `<s>` or `</s>` (a BOS or EOS) would be taken for a tag and vanish from the axis; escaped, it shows as
    itself (Plotly decodes those entities; quotes stay, Plotly would show `&quot;` literally)."""
    import html

    return html.escape(str(s), quote=False)
