"""The index page: a header with the SAE's numbers, the density histogram, and a client-side table of
every feature that sorts (click a column), filters (density classes, frequency range, pages only) and
searches (feature id or top-token text), with the dense and the dead features in their own sections.

The table is built in the browser from JSON inside `<script type="application/json">` (with `<`, `>`,
`&` written as `\\u003c`...), and the script only ever sets `textContent` and numeric attributes, so no
data string is parsed as markup. The state lives in the URL fragment (`#sort=max&dir=desc&q=the&cls=rare,sparse`),
so a view can be linked to, and the tests drive the page through it. No network, no library.
"""

from __future__ import annotations

import json
import math
from typing import Any

from interp.dashboards import svg
from interp.dashboards.page import CSS, esc


def json_for_script(obj: Any) -> str:
    return (
        json.dumps(obj, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    )


def density_histogram(freqs: list[float], bins: int = 40) -> str:
    """SVG histogram of log10(firing frequency) over the features that fire."""
    live = [math.log10(f) for f in freqs if f > 0]
    if not live:
        return '<p class="none">no feature fires</p>'
    lo, hi = math.floor(min(live)), max(0.0, math.ceil(max(live)))
    if hi <= lo:
        hi = lo + 1
    w = (hi - lo) / bins
    counts = [0] * bins
    for x in live:
        counts[min(bins - 1, int((x - lo) / w))] += 1
    edges = [lo + i * w for i in range(bins + 1)]
    return svg.bars(
        edges,
        counts,
        title=f"feature density: log10(firing frequency), {len(live)} live features",
        xlabel="log10 frequency",
        color="#16a085",
    )


def index_html(rows: list[dict[str, Any]], header: dict[str, Any], title: str) -> str:
    """`rows`: one dict per feature {f, name, cls, freq, max, mean, toks [text], spark [counts], page (href or "")};
    `header`: label -> value (plain text) shown above the table."""
    head = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in header.items())
    dens = density_histogram([r["freq"] for r in rows])
    return (
        _PAGE.replace("__TITLE__", esc(title))
        .replace("__CSS__", CSS)
        .replace("__HEAD__", head)
        .replace("__DENS__", dens)
        .replace("__DATA__", json_for_script(rows))
    )


_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>__TITLE__</title><style>body { margin: 1em; } __CSS__
.idash .top { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 2em; align-items: start; }
.idash .ctl { margin: 0.6em 0; display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; align-items: center; }
.idash .ctl input[type=search] { width: 18em; } .idash .ctl input[type=number] { width: 6em; }
.idash table.feat th { cursor: pointer; user-select: none; white-space: nowrap; }
.idash table.feat td { border-bottom: 1px solid #f0f0f0; vertical-align: middle; }
.idash td.toks { font-family: ui-monospace, Menlo, monospace; font-size: 12px; max-width: 36em; overflow-wrap: anywhere; }
.idash .tk { background: #fdf0e3; border-radius: 2px; padding: 0 2px; margin-right: 4px; white-space: pre; }
.idash th.sorted::after { content: " \\25BE"; } .idash th.sorted.asc::after { content: " \\25B4"; }
</style></head><body><div class="idash">
<h2>__TITLE__</h2>
<div class="top"><table class="hdr">__HEAD__</table><div>__DENS__</div></div>
<div class="ctl">
 <label>search <input type="search" id="q" placeholder="feature id or token text"></label>
 <span id="classes"></span>
 <label>freq % from <input type="number" id="fmin" step="any"> to <input type="number" id="fmax" step="any"></label>
 <label><input type="checkbox" id="pages"> with a page only</label>
 <span class="muted" id="count"></span>
</div>
<h3>Features <span class="muted">(not dense, not dead)</span></h3><div id="t-main"></div>
<h3>Dense features</h3><div id="t-dense"></div>
<h3>Dead features</h3><div id="t-dead"></div>
</div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
const ROWS = JSON.parse(document.getElementById("data").textContent);
const CLASSES = ["rare", "sparse", "common", "dense", "dead"];
const COLS = [["f", "feature"], ["cls", "density"], ["freq", "fires %"], ["max", "max"], ["mean", "mean active"],
              ["spark", "histogram"], ["toks", "top tokens"]];
const state = {sort: null, dir: "desc", q: "", cls: new Set(CLASSES), fmin: null, fmax: null, pages: false};

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.has("sort")) state.sort = h.get("sort");
  if (h.has("dir")) state.dir = h.get("dir") === "asc" ? "asc" : "desc";
  if (h.has("q")) state.q = h.get("q");
  if (h.has("cls")) state.cls = new Set(h.get("cls").split(",").filter(c => CLASSES.includes(c)));
  if (h.has("fmin")) state.fmin = parseFloat(h.get("fmin"));
  if (h.has("fmax")) state.fmax = parseFloat(h.get("fmax"));
  state.pages = h.get("pages") === "1";
}
function writeHash() {
  const h = new URLSearchParams();
  if (state.sort) { h.set("sort", state.sort); h.set("dir", state.dir); }
  if (state.q) h.set("q", state.q);
  if (state.cls.size !== CLASSES.length) h.set("cls", [...state.cls].join(","));
  if (state.fmin !== null && !isNaN(state.fmin)) h.set("fmin", state.fmin);
  if (state.fmax !== null && !isNaN(state.fmax)) h.set("fmax", state.fmax);
  if (state.pages) h.set("pages", "1");
  history.replaceState(null, "", "#" + h.toString());
}
function keep(r) {
  if (!state.cls.has(r.cls)) return false;
  const pct = 100 * r.freq;
  if (state.fmin !== null && !isNaN(state.fmin) && pct < state.fmin) return false;
  if (state.fmax !== null && !isNaN(state.fmax) && pct > state.fmax) return false;
  if (state.pages && !r.page) return false;
  if (state.q) {
    const q = state.q.toLowerCase();
    if (String(r.f) !== q && !r.name.toLowerCase().includes(q) && !r.toks.some(t => t.toLowerCase().includes(q))) return false;
  }
  return true;
}
function cmp(a, b) {
  const k = state.sort; if (!k) return 0;
  let x = a[k], y = b[k];
  if (k === "toks") { x = a.toks.join(" "); y = b.toks.join(" "); }
  if (k === "cls") { x = CLASSES.indexOf(a.cls); y = CLASSES.indexOf(b.cls); }
  const s = x < y ? -1 : x > y ? 1 : a.f - b.f;
  return state.dir === "asc" ? s : -s;
}
function fmt(x) { return x === 0 ? "0" : Math.abs(x) >= 0.01 && Math.abs(x) < 1e4 ? x.toPrecision(4) : x.toExponential(2); }
function spark(counts) {
  const ns = "http://www.w3.org/2000/svg", s = document.createElementNS(ns, "svg");
  const n = counts.length, top = Math.max(1, ...counts);
  s.setAttribute("width", "80"); s.setAttribute("height", "18"); s.setAttribute("viewBox", "0 0 " + n + " 18");
  s.setAttribute("preserveAspectRatio", "none");
  counts.forEach((c, i) => {
    const r = document.createElementNS(ns, "rect"), h = 18 * Math.sqrt(c / top);
    r.setAttribute("x", i); r.setAttribute("width", 0.85); r.setAttribute("y", 18 - h); r.setAttribute("height", h);
    r.setAttribute("fill", "#e67e22"); s.appendChild(r);
  });
  return s;
}
function cell(tr, content, cls) {
  const td = document.createElement("td"); if (cls) td.className = cls;
  if (content instanceof Node) td.appendChild(content); else td.textContent = content;
  tr.appendChild(td); return td;
}
function table(id, rows) {
  const host = document.getElementById(id); host.textContent = "";
  if (!rows.length) { const p = document.createElement("p"); p.className = "none"; p.textContent = "none"; host.appendChild(p); return; }
  const t = document.createElement("table"); t.className = "feat"; const hr = document.createElement("tr");
  for (const [k, label] of COLS) {
    const th = document.createElement("th"); th.textContent = label; th.dataset.key = k;
    if (state.sort === k) th.className = "sorted" + (state.dir === "asc" ? " asc" : "");
    if (k !== "spark") th.addEventListener("click", () => {
      state.dir = state.sort === k && state.dir === "desc" ? "asc" : "desc"; state.sort = k; render();
    });
    hr.appendChild(th);
  }
  t.appendChild(hr);
  for (const r of rows) {
    const tr = document.createElement("tr"); tr.dataset.f = r.f;
    let name = r.name;
    if (r.page) { const a = document.createElement("a"); a.href = r.page; a.textContent = name; cell(tr, a); } else cell(tr, name);
    const b = document.createElement("span"); b.className = "badge b-" + r.cls; b.textContent = r.cls; cell(tr, b);
    cell(tr, fmt(100 * r.freq), "num"); cell(tr, fmt(r.max), "num"); cell(tr, fmt(r.mean), "num");
    cell(tr, spark(r.spark));
    const toks = document.createElement("span");
    for (const s of r.toks) { const k = document.createElement("span"); k.className = "tk"; k.textContent = s; toks.appendChild(k); }
    cell(tr, toks, "toks");
    t.appendChild(tr);
  }
  host.appendChild(t);
}
function render() {
  const shown = ROWS.filter(keep);
  const sorted = state.sort ? shown.slice().sort(cmp) : shown;
  table("t-main", sorted.filter(r => r.cls !== "dense" && r.cls !== "dead"));
  table("t-dense", sorted.filter(r => r.cls === "dense"));
  table("t-dead", sorted.filter(r => r.cls === "dead"));
  document.getElementById("count").textContent = shown.length + " of " + ROWS.length + " features shown";
  writeHash();
}
function controls() {
  const host = document.getElementById("classes");
  for (const c of CLASSES) {
    const l = document.createElement("label"), i = document.createElement("input");
    i.type = "checkbox"; i.checked = state.cls.has(c);
    i.addEventListener("change", () => { if (i.checked) state.cls.add(c); else state.cls.delete(c); render(); });
    l.appendChild(i); l.appendChild(document.createTextNode(" " + c + " ")); host.appendChild(l);
  }
  const q = document.getElementById("q"); q.value = state.q;
  q.addEventListener("input", () => { state.q = q.value.trim(); render(); });
  for (const id of ["fmin", "fmax"]) {
    const e = document.getElementById(id); if (state[id] !== null) e.value = state[id];
    e.addEventListener("input", () => { state[id] = e.value === "" ? null : parseFloat(e.value); render(); });
  }
  const p = document.getElementById("pages"); p.checked = state.pages;
  p.addEventListener("change", () => { state.pages = p.checked; render(); });
}
readHash(); controls(); render();
</script></body></html>
"""
