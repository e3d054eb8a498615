"""An attention-pattern view: one self-contained HTML page (no network, no external scripts).

    view = AttentionView.from_model(model, "When Mary and John went to the store, John gave a drink to")
    view.save("runs/attn.html")          # a file that opens offline
    view                                  # inline in a notebook (`_repr_html_`, inside an iframe)

The page has a layer selector and a head selector, a query x key heatmap of the chosen head (hover a
cell: "query token -> key token: weight"), a strip of the tokens where hovering one shows what it
attends to (shading, and the three keys it attends to most), and a thumbnail of every head of the
layer (click one to select it), kept beside the heatmap, which scrolls when the text is long, under a
colour scale of the weights. Why our own and not circuitsvis: circuitsvis loads its JavaScript from
a CDN, so its views are blank offline; this one is ~150 lines of plain JS inlined in the page.

Every token is text to the page: tokens travel as JSON with `<`, `>` and `&` escaped and are put in
the page with `textContent`, never as HTML; the title is HTML-escaped.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from interp.store.atomic import atomic_write_bytes


def _json(obj) -> str:
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass
class AttentionView:
    """Attention patterns of one sequence, [layer, head, query, key], with the token strings."""

    tokens: list[str]
    """The sequence's tokens as text (any string: it is escaped)."""
    patterns: Tensor = field(repr=False)
    """[layer, head, query, key] attention weights."""
    layers: list[int] = field(default_factory=list)
    """Model layer of each entry of the first axis (default 0..n-1)."""
    title: str = "Attention patterns"
    focus: tuple[int, int, int | None] = (0, 0, None)
    """What the page shows first: (index into `layers`, head, query position to hover, or None)."""

    def __post_init__(self):
        if self.patterns.ndim != 4:
            raise ValueError(f"patterns must be [layer, head, query, key]; got shape {tuple(self.patterns.shape)}")
        n = len(self.tokens)
        if self.patterns.shape[2:] != (n, n):
            raise ValueError(f"patterns cover {tuple(self.patterns.shape[2:])} positions but there are {n} tokens")
        self.layers = list(self.layers) or list(range(self.patterns.shape[0]))
        if len(self.layers) != self.patterns.shape[0]:
            raise ValueError(f"{len(self.layers)} layer labels for {self.patterns.shape[0]} layers of patterns")

    @classmethod
    def from_cache(cls, cache, tokens: list[str] | None = None, batch_index: int = 0, title: str | None = None):
        """From a cache holding `blocks.{l}.attn.hook_pattern` (the layers it holds); padding dropped."""
        layers = cache.layers_of("pattern")
        if not layers:
            raise ValueError("the cache holds no attention patterns: cache names='blocks.*.attn.hook_pattern'")
        pats = torch.stack([cache["pattern", l][batch_index] for l in layers]).float()
        keep = None if cache.attention_mask is None else cache.attention_mask[batch_index].bool().cpu()
        if keep is not None:
            pats = pats[:, :, keep][:, :, :, keep]
        if tokens is None:
            if cache.model is None or cache.tokens is None:
                raise ValueError("pass tokens=[...]: this cache has no model to turn its ids into text")
            ids = cache.tokens[batch_index].cpu()
            tokens = cache.model.to_str_tokens(ids[keep] if keep is not None else ids)
        return cls(list(tokens), pats.cpu(), layers, title or "Attention patterns")

    @classmethod
    def from_model(
        cls,
        model,
        text: str,
        layers: list[int] | None = None,
        prepend_bos: bool | None = None,
        title: str | None = None,
    ):
        """Run one text and view the patterns of `layers` (default: all)."""
        if not isinstance(text, str):
            raise TypeError("AttentionView.from_model takes one text; for a batch use from_cache(cache, batch_index=i)")
        layers = list(range(model.n_layers)) if layers is None else [l % model.n_layers for l in layers]
        names = [f"blocks.{l}.attn.hook_pattern" for l in layers]
        _, cache = model.run_with_cache(text, names=names, return_logits=False, prepend_bos=prepend_bos)
        return cls.from_cache(cache, title=title or f"Attention patterns: {model.name}")

    # ------------------------------------------------------------------ output
    def to_html(self) -> str:
        """The whole page as a string."""
        data = {
            "tokens": list(self.tokens),
            "layers": self.layers,
            "focus": list(self.focus),
            "p": [
                [[[round(float(v), 4) for v in row] for row in head] for head in layer]
                for layer in self.patterns.tolist()
            ],
        }
        return _PAGE.replace("__TITLE__", html.escape(self.title)).replace("__DATA__", _json(data))

    def save(self, path: str | Path) -> Path:
        """Write the page (atomically) and return its path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, self.to_html().encode("utf-8"))
        return path

    def _repr_html_(self) -> str:
        height = 360 + 14 * len(self.tokens)
        return f'<iframe srcdoc="{html.escape(self.to_html(), quote=True)}" style="width:100%;height:{height}px;border:0"></iframe>'


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font-family:system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 10px}
.bar{display:flex;gap:16px;align-items:center;margin-bottom:10px}
.tok{display:inline-block;padding:2px 3px;margin:1px;border-radius:3px;font-family:monospace;white-space:pre;cursor:default;border:1px solid #ddd}
.tok.q{outline:2px solid #d33}
#wrap{display:flex;gap:24px;align-items:flex-start}
table{border-collapse:collapse;font-family:monospace;font-size:11px}
td{width:16px;height:16px;padding:0;border:1px solid #f4f4f4}
th{font-weight:normal;white-space:pre;padding:0 4px;line-height:16px}
th.k{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left;padding:4px 0;min-width:16px}
#side{flex:0 0 auto}
#gridbox{overflow:auto;max-width:calc(100vw - 440px);max-height:85vh}
#thumbs{display:grid;grid-template-columns:repeat(4,auto);gap:8px}
#scale{display:flex;align-items:center;gap:6px;font-size:11px;margin-bottom:6px}
#scale .g{width:160px;height:12px;border:1px solid #ccc;background:linear-gradient(to right,rgba(220,40,40,0),rgba(220,40,40,1))}
.th{text-align:center;font-size:11px;cursor:pointer;padding:3px;border:2px solid transparent}
.th.sel{border-color:#d33}
#info{font-family:monospace;min-height:1.3em;margin:8px 0}
</style></head><body>
<h1>__TITLE__</h1>
<div class="bar"><label>layer <select id="layer"></select></label><label>head <select id="head"></select></label>
<span style="color:#777">hover a token to see what it attends to; click a thumbnail to pick a head</span></div>
<div id="strip"></div><div id="info"></div>
<div id="wrap"><div id="side"><div style="font-size:12px;margin-bottom:4px">all heads of this layer</div><div id="thumbs"></div></div>
<div><div id="scale"><span>attention weight</span><span>0</span><span class="g"></span><span>1</span></div>
<div id="gridbox"><table id="grid"></table></div></div></div>
<script>
const D = __DATA__;
const T = D.tokens, n = T.length;
const show = s => s.replace(/\\n/g, "\\u21b5").replace(/\\t/g, "\\u21e5") || "\\u200b";
const $ = id => document.getElementById(id);
let L = 0, H = 0;
function shade(v){ const a = Math.max(0, Math.min(1, v)); return `rgba(220,40,40,${a.toFixed(3)})`; }
function opt(sel, labels){ sel.textContent = ""; labels.forEach((t, i) => { const o = document.createElement("option"); o.value = i; o.textContent = t; sel.appendChild(o); }); }
function cur(){ return D.p[L][H]; }
function strip(){
  const s = $("strip"); s.textContent = "";
  T.forEach((t, i) => { const e = document.createElement("span"); e.className = "tok"; e.textContent = show(t); e.dataset.i = i;
    e.onmouseenter = () => attend(i); e.onmouseleave = clearAttend; s.appendChild(e); });
}
function attend(q){
  const row = cur()[q], toks = $("strip").children;
  for (let k = 0; k < n; k++){ toks[k].style.background = k <= q || row[k] > 0 ? shade(row[k]) : ""; toks[k].classList.toggle("q", k === q); }
  const top = row.map((v, k) => [v, k]).sort((a, b) => b[0] - a[0]).slice(0, 3);
  $("info").textContent = `query ${q} ${JSON.stringify(T[q])} attends to: ` + top.map(([v, k]) => `${k} ${JSON.stringify(T[k])} ${v.toFixed(3)}`).join(",  ");
}
function clearAttend(){ for (const e of $("strip").children){ e.style.background = ""; e.classList.remove("q"); } $("info").textContent = ""; }
function grid(){
  const g = $("grid"); g.textContent = ""; const P = cur();
  const head = g.insertRow(); head.appendChild(document.createElement("th"));
  T.forEach(t => { const c = document.createElement("th"); c.className = "k"; c.textContent = show(t); head.appendChild(c); });
  for (let q = 0; q < n; q++){
    const r = g.insertRow(); const lab = document.createElement("th"); lab.textContent = show(T[q]); lab.style.textAlign = "right"; r.appendChild(lab);
    for (let k = 0; k < n; k++){ const c = r.insertCell(); c.style.background = shade(P[q][k]);
      c.title = `${JSON.stringify(T[q])} -> ${JSON.stringify(T[k])}: ${P[q][k].toFixed(4)}`; c.onmouseenter = () => attend(q); }
  }
}
function thumbs(){
  const box = $("thumbs"); box.textContent = ""; const px = Math.max(1, Math.floor(72 / n));
  D.p[L].forEach((P, h) => {
    const d = document.createElement("div"); d.className = "th" + (h === H ? " sel" : "");
    const cv = document.createElement("canvas"); cv.width = cv.height = px * n; const x = cv.getContext("2d");
    for (let q = 0; q < n; q++) for (let k = 0; k < n; k++){ x.fillStyle = shade(P[q][k]); x.fillRect(k * px, q * px, px, px); }
    d.appendChild(cv); const cap = document.createElement("div"); cap.textContent = `L${D.layers[L]}H${h}`; d.appendChild(cap);
    d.onclick = () => { H = h; $("head").value = h; draw(); }; box.appendChild(d);
  });
}
function draw(){ grid(); thumbs(); clearAttend(); }
opt($("layer"), D.layers.map(l => "L" + l));
opt($("head"), D.p[0].map((_, h) => "H" + h));
$("layer").onchange = e => { L = +e.target.value; H = Math.min(H, D.p[L].length - 1); draw(); };
$("head").onchange = e => { H = +e.target.value; draw(); };
[L, H] = [Math.min(D.focus[0], D.p.length - 1), Math.min(D.focus[1], D.p[0].length - 1)];
$("layer").value = L; $("head").value = H;
strip(); draw();
if (D.focus[2] !== null) attend((D.focus[2] % n + n) % n);
</script></body></html>
"""
