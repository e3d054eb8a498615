"""Every notebook executes with no stderr output, converts to HTML, and each figure draws in a browser.

Each notebook is executed (nbclient), converted with nbconvert's HTML exporter and rendered in headless
Chromium twice: with scripts (JupyterLab, VS Code, nbconvert HTML: the live plotly figure) and without
(GitHub and nbviewer strip scripts: the static SVG). Each figure's box must hold non-white pixels of
several colours in both. Screenshots are kept under ``$INTERP_NB_SHOTS`` when it is set (else a temp folder).

Slow (the notebooks load real models): ``pytest -m slow tests/notebooks``. Skipped where Chromium, nbconvert
or nbclient is absent.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
WIDTH = 1200

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium on this machine"),
]

# Written into the converted page: once loaded, each figure's box (page coordinates) and whether its live
# plotly figure drew, as JSON in the page title (read back with --dump-dom).
_PROBE = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = [].map.call(document.querySelectorAll(".interp-fig"), function (f) {
    var r = f.getBoundingClientRect();
    return {x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height,
            live: !!f.querySelector(".js-plotly-plot .main-svg")};
  });
  var pre = document.createElement("pre"); pre.id = "interp-probe";
  pre.textContent = JSON.stringify({figs: out, height: document.documentElement.scrollHeight});
  document.body.appendChild(pre);
}, 500); });
</script>"""


def _png(path: Path) -> np.ndarray:
    """RGB pixels of an 8-bit RGB/RGBA PNG (what Chromium writes), decoded without Pillow."""
    data = path.read_bytes()
    pos, chunks, w, h, ch = 8, [], 0, 0, 4
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + n
    raw, stride = zlib.decompress(b"".join(chunks)), w * ch
    rows, prev = [], [0] * stride
    for y in range(h):
        f, line = raw[y * (stride + 1)], raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]
        cur = list(line)
        if f == 2:
            cur = [(v + p) & 255 for v, p in zip(line, prev)]
        elif f in (1, 3, 4):  # sub, average, paeth: sequential in x
            for x in range(stride):
                a = cur[x - ch] if x >= ch else 0
                b = prev[x]
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) >> 1
                else:
                    c = prev[x - ch] if x >= ch else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (cur[x] + pred) & 255
        rows.append(cur)
        prev = cur
    return np.array(rows, dtype=np.uint8).reshape(h, w, ch)[:, :, :3]


def _chromium(html: Path, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
        cmd += ["--virtual-time-budget=8000", *args, html.as_uri()]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _execute(path: Path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    return nb


@pytest.fixture(scope="module")
def shots() -> Path:
    out = Path(os.environ.get("INTERP_NB_SHOTS") or tempfile.mkdtemp(prefix="nb-shots-"))
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_renders(path: Path, shots: Path, monkeypatch):
    pytest.importorskip("nbconvert")
    from nbconvert import HTMLExporter

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = _execute(path)

    stderr = [
        (i, o["text"][:200]) for i, c in enumerate(nb.cells) for o in c.get("outputs", []) if o.get("name") == "stderr"
    ]
    assert not stderr, f"{path.name}: cells with stderr output: {stderr}"
    n_figs = 0
    for i, c in enumerate(nb.cells):
        for o in c.get("outputs", []):
            data = o.get("data", {})
            if "application/vnd.plotly.v1+json" in data and "text/html" not in data:
                pytest.fail(f"{path.name} cell {i}: a plotly mime bundle only (blank outside JupyterLab's extension)")
            n_figs += 'class="interp-fig"' in data.get("text/html", "")

    body, _ = HTMLExporter().from_notebook_node(nb)
    # GitHub and nbviewer strip scripts: the same page without any, but for the probe.
    pages = {"js": body, "nojs": re.sub(r"<script[\s\S]*?</script>", "", body, flags=re.I)}
    pad = '<div style="height:1500px"></div>'
    for mode, text in pages.items():
        page = shots / f"{path.stem}.{mode}.html"
        page.write_text(text.replace("</body>", pad + _PROBE + "</body>"), encoding="utf-8")
        dom = _chromium(page, "--dump-dom", f"--window-size={WIDTH},900").stdout
        m = re.search(r'<pre id="interp-probe">(.*?)</pre>', dom, re.S)
        assert m, f"{path.name} ({mode}): the page did not load"
        probe = json.loads(html.unescape(m.group(1)))
        assert len(probe["figs"]) == n_figs, (path.name, mode, probe["figs"], n_figs)
        if mode == "js":
            assert all(f["live"] for f in probe["figs"]), f"{path.name}: a live plotly figure did not draw: {probe}"
        full = shots / f"{path.stem}.{mode}.png"  # the whole page, to look at
        _chromium(page, f"--screenshot={full}", f"--window-size={WIDTH},{min(int(probe['height']), 16000)}")
        page_png = _png(full)  # each figure's box is cut from the whole page, laid out at the probe's width
        for k, f in enumerate(probe["figs"]):
            png = full
            y, x = int(f["y"]), int(f["x"])
            box = page_png[y : y + int(f["h"]), x : x + int(f["w"])]
            inked = float((box.min(axis=2) < 235).mean()) if box.size else 0.0
            colours = len(np.unique(box.reshape(-1, 3)[::7] // 16, axis=0)) if box.size else 0
            assert f["h"] > 100 and inked > 0.003 and colours > 5, (  # a blank box: 0 ink, 1 colour; a line plot ~1%
                f"{path.name} ({mode}) figure {k} looks blank: {f}, {inked:.3%} inked, {colours} colours; see {png}"
            )
