"""Readable attribution results: per query, the training examples with the highest and lowest scores, as text.

    interp attribute show RUN [--top 3] [--out DIR]     # prints the tables, writes DIR/report.html (DIR = RUN)

A finished run (`attribution.jobs.run_attribution`) holds `scores.safetensors` ([n_train, n_query], plus
`sdi` [n_train, n_query, tau] for SDI), `result.json` (method, model and data identity) and `texts.json`
(the training and query sequences decoded with the model's tokenizer at the end of the run), so `show`
needs neither the model nor the data files.

The HTML page is one self-contained file (no scripts, no network): per query its text, the ranked top and
bottom training examples with scores, a histogram of all scores (inline SVG) and, for SDI, a heat map of
the top examples' influence through each loop step. Every piece of model or user text is escaped.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import torch
from torch import Tensor


def load_run(run: str | Path) -> dict:
    """{"result", "scores" [n_train, n_query], "sdi" (or None), "texts": {"train", "queries"}} of a finished run."""
    run = Path(run)
    missing = [f for f in ("result.json", "scores.safetensors") if not (run / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{run} is not a finished attribution run (no {', '.join(missing)}); "
                                "run `interp attribute run --method ... --out RUN` first (a killed run resumes)")
    from interp.infra.json_file import read_json
    from interp.infra.tensor_file import read_tensors

    tensors = read_tensors(run / "scores.safetensors", what="attribution scores", need={"scores": 2})[0]
    result = read_json(run / "result.json", what="attribution result")
    scores, sdi = tensors["scores"], tensors.get("sdi")
    _check_result(run, result, scores, sdi)
    texts_path = run / "texts.json"
    n_train, n_q = scores.shape
    if texts_path.is_file():
        texts = read_json(texts_path, what="attribution texts")
        for key, n in (("train", n_train), ("queries", n_q)):
            got = texts.get(key)
            if not isinstance(got, list) or len(got) < n or not all(isinstance(t, str) for t in got[:n]):
                have = f"{len(got)} entries" if isinstance(got, list) else type(got).__name__
                raise ValueError(f"{texts_path}: {key!r} must be a list of {n} texts (one per row of "
                                 f"{run / 'scores.safetensors'}), got {have}: the run folder is damaged")
    else:  # written before texts.json existed: show row numbers
        texts = {"train": [f"<row {i}>" for i in range(n_train)], "queries": [f"<query {j}>" for j in range(n_q)]}
    return {"result": result, "scores": scores, "sdi": sdi, "texts": texts}


def _check_result(run: Path, result: dict, scores: Tensor, sdi: Tensor | None) -> None:
    """`result.json` and the score tensors agree (shapes, types, finite values), or a ValueError naming the file."""
    rfile, sfile = run / "result.json", run / "scores.safetensors"
    if not isinstance(result.get("method", ""), str):
        raise ValueError(f"{rfile}: 'method' must be a string, got {type(result['method']).__name__}")
    ident = result.get("identity", {})
    if not isinstance(ident, dict) or not all(isinstance(ident.get(k, {}), dict) for k in ("model", "data")):
        raise ValueError(f"{rfile}: 'identity' must be an object with 'model' and 'data' objects: the file is damaged")
    for key, n in (("n_train", scores.shape[0]), ("n_queries", scores.shape[1])):
        if key in result and result[key] != n:
            raise ValueError(f"{rfile} says {key} = {result[key]!r} but {sfile} holds scores of shape "
                             f"{list(scores.shape)}: the two files are not from the same run")
    if not scores.is_floating_point() or scores.numel() == 0:
        raise ValueError(f"{sfile}: 'scores' must be a non-empty float tensor, got {scores.dtype} {list(scores.shape)}")
    bad = int((~torch.isfinite(scores)).sum())
    if bad:
        raise ValueError(f"{sfile} holds {bad} non-finite scores (NaN or inf): the run diverged or the file is "
                         "damaged; rerun it with --restart")
    if sdi is not None and (sdi.dim() != 3 or list(sdi.shape[:2]) != list(scores.shape) or not sdi.is_floating_point()):
        raise ValueError(f"{sfile}: 'sdi' has shape {list(sdi.shape)}; expected [{scores.shape[0]}, "
                         f"{scores.shape[1]}, loop steps]")


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def rankings(scores: Tensor, top: int) -> list[dict]:
    """Per query: {"top": [(row, score)], "bottom": [(row, score)]}, highest first / lowest first."""
    out = []
    k = min(top, scores.shape[0])
    for j in range(scores.shape[1]):
        col = scores[:, j]
        hi = torch.argsort(col, descending=True, stable=True)[:k]
        lo = torch.argsort(col, stable=True)[:k]
        out.append({"top": [(int(i), float(col[i])) for i in hi], "bottom": [(int(i), float(col[i])) for i in lo]})
    return out


def text_report(run: str | Path, top: int = 3, width: int = 100) -> str:
    """The console report: header (method, model, data) and per query the top/bottom training examples."""
    r = load_run(run)
    res, texts = r["result"], r["texts"]
    ident = res.get("identity", {})
    lines = [f"{res.get('method', '?')} attribution: {res.get('n_train', '?')} training x {res.get('n_queries', '?')} "
             f"queries, model {ident.get('model', {}).get('spec', '?')}",
             f"  train {ident.get('data', {}).get('train', '?')}   queries {ident.get('data', {}).get('queries', '?')}"]
    for j, rank in enumerate(rankings(r["scores"], top)):
        lines += ["", f"query {j}: {_one_line(texts['queries'][j], width)}"]
        for label, rows in (("top (most helpful)", rank["top"]), ("bottom (most harmful)", rank["bottom"])):
            lines.append(f"  {label}")
            for i, s in rows:
                lines.append(f"    {s:+11.4g}  #{i:<5d} {_one_line(texts['train'][i], width)}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ HTML
def _histogram_svg(values: Tensor, bins: int = 30, w: int = 360, h: int = 90) -> str:
    v = values.double()
    lo, hi = float(v.min()), float(v.max())
    counts = torch.histc(v, bins=bins, min=lo, max=hi if hi > lo else lo + 1).tolist()
    top = max(counts) or 1
    bw = w / bins
    bars = "".join(f'<rect x="{i * bw:.1f}" y="{h - 14 - c / top * (h - 20):.1f}" width="{bw - 1:.1f}" '
                   f'height="{c / top * (h - 20):.1f}" fill="#4c78a8"/>' for i, c in enumerate(counts))
    axis = (f'<text x="0" y="{h - 2}" font-size="10">{lo:.3g}</text>'
            f'<text x="{w}" y="{h - 2}" font-size="10" text-anchor="end">{hi:.3g}</text>')
    return f'<svg width="{w}" height="{h}" role="img" aria-label="score histogram">{bars}{axis}</svg>'


def _color(x: float, scale: float) -> str:
    a = min(1.0, abs(x) / scale) if scale > 0 else 0.0
    rgb = (214, 39, 40) if x > 0 else (31, 119, 180)
    return f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{a:.2f})"


def _heatmap(sdi_q: Tensor, rows: list[int], texts: list[str]) -> str:
    """Rows = training examples, columns = loop steps of the query, cells = SDI share."""
    sub = sdi_q[rows]
    scale = float(sub.abs().max()) or 1.0
    head = "".join(f"<th>step {t + 1}</th>" for t in range(sub.shape[1]))
    body = "".join(
        f"<tr><td class=txt>#{i} {html.escape(_one_line(texts[i], 60))}</td>"
        + "".join(f'<td style="background:{_color(float(x), scale)}">{float(x):+.3g}</td>' for x in sub[n])
        + "</tr>" for n, i in enumerate(rows))
    return f"<table class=heat><tr><th>training example</th>{head}</tr>{body}</table>"


CSS = """body{font-family:sans-serif;margin:24px;max-width:1300px}h2{margin-top:32px;border-top:1px solid #ccc;
padding-top:12px}table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}td.txt{font-family:monospace;white-space:pre-wrap;max-width:900px}
.q{font-family:monospace;background:#f4f4f4;padding:6px;white-space:pre-wrap}.meta{color:#555;font-size:13px}
.cols{display:flex;gap:24px;align-items:flex-start}.heat td{text-align:right;font-family:monospace}"""


def html_report(run: str | Path, out: str | Path | None = None, top: int = 10) -> Path:
    """Write `report.html` (into `out`, default the run folder) and return its path."""
    r = load_run(run)
    res, texts, scores = r["result"], r["texts"], r["scores"]
    ident = res.get("identity", {})
    esc = html.escape
    parts = [f"<!doctype html><meta charset=utf-8><title>{esc(res.get('method', ''))} attribution</title>",
             f"<style>{CSS}</style><h1>{esc(res.get('method', '?').upper())} attribution</h1>",
             f"<p class=meta>model <b>{esc(str(ident.get('model', {}).get('spec', '?')))}</b> "
             f"(weights sha256 {esc(str(ident.get('model', {}).get('weights_sha256', ''))[:16])}); "
             f"train {esc(str(ident.get('data', {}).get('train', '?')))} ({res.get('n_train')} sequences); "
             f"queries {esc(str(ident.get('data', {}).get('queries', '?')))} ({res.get('n_queries')}). "
             "Positive score: the training example helps the query (TracIn: lowers its loss; EK-FAC: raises the "
             "measurement); negative: it works against it.</p>"]
    for j, rank in enumerate(rankings(scores, top)):
        parts.append(f"<h2>query {j}</h2><div class=q>{esc(texts['queries'][j])}</div>")
        tables = []
        for label, rows in (("top (most helpful)", rank["top"]), ("bottom (most harmful)", rank["bottom"])):
            body = "".join(f"<tr><td>{n + 1}</td><td>{s:+.4g}</td><td>#{i}</td><td class=txt>{esc(texts['train'][i])}</td></tr>"
                           for n, (i, s) in enumerate(rows))
            tables.append(f"<div><h3>{label}</h3><table><tr><th>rank</th><th>score</th><th>row</th><th>text</th></tr>"
                          f"{body}</table></div>")
        parts.append(f"<h3>score distribution over all {scores.shape[0]} training examples</h3>"
                     + _histogram_svg(scores[:, j]))
        parts.append("<div class=cols>" + "".join(tables) + "</div>")
        if r["sdi"] is not None:
            rows = [i for i, _ in rank["top"]] + [i for i, _ in rank["bottom"] if i not in dict(rank["top"])]
            parts.append("<h3>SDI: influence through each loop step of the query (top and bottom examples)</h3>"
                         + _heatmap(r["sdi"][:, j], rows, texts["train"]))
    path = Path(out or run) / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    from interp.store.atomic import atomic_write_bytes

    atomic_write_bytes(path, "\n".join(parts).encode())
    return path
