"""Render our circuit-tracer export in circuit-tracer 0.5's own frontend, in headless Chromium, offline.

    python -m circuits.experiments.circuit_tracer_frontend DATA_DIR --out shot.png   # DATA_DIR from `circuits export`

What it needs (none of it is part of this project; nothing is downloaded at run time):

- `INTERP_CT_FRONTEND`: a folder holding the `circuit_tracer` package, e.g. made with
  `pip install --target DIR --no-deps circuit-tracer==0.5.0` (its wheel carries `frontend/assets/`);
- `INTERP_CT_NPM`: an npm prefix with `d3-jetpack@2.3.0`, `pako@2.1.0` and `dagre@0.8.5`
  (`npm install --prefix DIR d3-jetpack@2.3.0 pako@2.1.0 dagre@0.8.5`), which stand in for the scripts their
  `index.html` loads from CDNs, plus two small shims here for what their own jetpack build adds (jetpack's
  selection methods on `d3.selection.prototype`, and `c.drawAxis` on `d3.conventions`);
- Chromium: `INTERP_CHROMIUM`, else `chromium` on the PATH (Debian: `apt-get install chromium`).

The assets are copied into a temporary site, the CDN tags swapped for those local files, the data folder laid
out where their page fetches it (`data/graph-metadata.json`, `graph_data/<slug>.json`), and the site served
on 127.0.0.1 (a random port, stopped at the end). A small script in the page records every JS error
(`error`, `unhandledrejection`, `console.error`) and counts the nodes their link graph drew (`text.node`).
The result: {"errors": [...], "nodes_drawn": n, "nodes_expected": n, "slug": ..., "screenshot": path}.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

NPM_FILES = {
    "d3-jetpack/build/d3v7+jetpack.js": "d3.js",
    "pako/dist/pako.min.js": "pako.min.js",
    "dagre/dist/dagre.min.js": "dagre.min.js",
}

SHIM = r"""
(function(){
  // d3v7+jetpack.js bundles two copies of d3-selection: jetpack's methods sit on the copy that d3.select does not
  // return. Their custom build puts them on the exported one; do the same, reaching jetpack's copy through
  // d3.conventions (which selects the body with it).
  var c0 = d3.conventions({totalWidth: 1, totalHeight: 1, layers: 'd'});
  var jp = Object.getPrototypeOf(c0.sel);
  c0.layers.forEach(function(l){ l.remove(); });
  c0.sel.style('position', null).style('height', null).style('width', null);
  ['translate', 'append', 'insert', 'parent', 'selectAppend', 'tspans', 'appendMany', 'at', 'st', 'prop']
    .forEach(function(k){ if (jp[k]) d3.selection.prototype[k] = jp[k]; });
  // ... and gives d3.conventions' result a drawAxis(svg?) method
  var conventions = d3.conventions;
  d3.conventions = function(c){
    c = conventions(c);
    c.drawAxis = function(svg){ d3.drawAxis(Object.assign({}, c, {svg: svg || c.svg})); };
    return c;
  };
  window.npyjs = window.npyjs || {parse: function(){ throw new Error('npy files are not available offline'); }};
})();
"""

CAPTURE = r"""
<script>
window.__interpErrors = [];
window.addEventListener('error', function(e){ window.__interpErrors.push('error: ' + (e.message || e)); });
window.addEventListener('unhandledrejection', function(e){ window.__interpErrors.push('rejection: ' + (e.reason && e.reason.stack || e.reason)); });
(function(){ var orig = console.error; console.error = function(){
  window.__interpErrors.push('console.error: ' + Array.from(arguments).map(String).join(' ')); orig.apply(console, arguments); }; })();
</script>
"""

REPORT = r"""
<script>
(function(){
  var t0 = Date.now();
  function report(){
    var drawn = document.querySelectorAll('.cg text.node').length;
    if (!drawn && Date.now() - t0 < 8000) return setTimeout(report, 200);
    setTimeout(function(){
      var pre = document.createElement('pre'); pre.id = 'interp-report';
      pre.textContent = JSON.stringify({errors: window.__interpErrors, nodes_drawn: document.querySelectorAll('.cg text.node').length});
      pre.style.display = 'none'; document.body.appendChild(pre);
    }, 500);
  }
  setTimeout(report, 200);
})();
</script>
"""


class MissingTools(RuntimeError):
    """The frontend, its npm stand-ins or Chromium are not installed here (the message says which, and how)."""


def find_tools() -> dict:
    """{"assets", "npm", "chromium"} or MissingTools naming what is missing and the variable that points to it."""
    missing = []
    ct = os.environ.get("INTERP_CT_FRONTEND", "")
    assets = Path(ct) / "circuit_tracer" / "frontend" / "assets" if ct else None
    if not assets or not (assets / "index.html").exists():
        missing.append(
            "circuit-tracer's frontend: set INTERP_CT_FRONTEND to a folder made with "
            "`pip install --target DIR --no-deps circuit-tracer==0.5.0`"
        )
    npm = Path(os.environ.get("INTERP_CT_NPM", "")) / "node_modules"
    if not os.environ.get("INTERP_CT_NPM") or not all((npm / f).exists() for f in NPM_FILES):
        missing.append(
            "the npm stand-ins for its CDN scripts: set INTERP_CT_NPM to a folder made with "
            "`npm install --prefix DIR d3-jetpack@2.3.0 pako@2.1.0 dagre@0.8.5`"
        )
    chromium = os.environ.get("INTERP_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        missing.append("Chromium: `apt-get install chromium`, or set INTERP_CHROMIUM")
    if missing:
        raise MissingTools("; ".join(missing))
    return {"assets": assets, "npm": npm, "chromium": chromium}


def stage_site(data_dir: Path, tools: dict, site: Path) -> str:
    """Lay out their page with local scripts and our data; returns the slug shown."""
    shutil.copytree(tools["assets"], site)
    vendor = site / "vendor"
    vendor.mkdir()
    for src, dst in NPM_FILES.items():
        shutil.copy(tools["npm"] / src, vendor / dst)
    (vendor / "shim.js").write_text(SHIM)
    html = (site / "index.html").read_text()
    local = {
        "hotserver-client-ws.js": "",
        "/d3.js": "<script src='./vendor/d3.js'></script>",
        "jetpack_2024-07-20.js": "<script src='./vendor/shim.js'></script>",
        "npy_v0.js": "",
        "dagre.min.js": "<script src='./vendor/dagre.min.js'></script>",
        "pako.min.js": "<script src='./vendor/pako.min.js'></script>",
    }

    def swap(m):
        for key, repl in local.items():
            if key in m.group(1):
                return repl
        raise ValueError(f"unexpected remote script in their index.html: {m.group(1)}")

    html = re.sub(r"<script src='(https?://[^']+)'></script>", swap, html)
    html = html.replace("<meta charset='utf-8'>", "<meta charset='utf-8'>" + CAPTURE, 1) + REPORT
    (site / "index.html").write_text(html)
    (site / "data").mkdir()
    (site / "graph_data").mkdir()
    for f in data_dir.glob("*.json"):
        shutil.copy(f, site / "data" / f.name)
        shutil.copy(f, site / "graph_data" / f.name)
    graphs = json.loads((data_dir / "graph-metadata.json").read_text())["graphs"]
    return graphs[-1]["slug"]


def expected_nodes(graph: dict, threshold: float | None) -> int:
    """The nodes their page keeps: all, or with a node_threshold the embedding, the logits and influence <= it."""
    if threshold is None:
        return len(graph["nodes"])
    return sum(1 for n in graph["nodes"] if n["feature_type"] in ("embedding", "logit") or n["influence"] <= threshold)


def render(data_dir, screenshot=None, slug: str | None = None, timeout: float = 60.0) -> dict:
    """Serve their page over our data folder on 127.0.0.1 and load it in headless Chromium (see the module doc)."""
    tools = find_tools()
    data_dir = Path(data_dir)
    with tempfile.TemporaryDirectory(prefix="ct_frontend_") as tmp:
        site = Path(tmp) / "site"
        slug = slug or stage_site(data_dir, tools, site)
        if not (site / "index.html").exists():
            stage_site(data_dir, tools, site)
        graph = json.loads((data_dir / f"{slug}.json").read_text())
        meta = next(
            g for g in json.loads((data_dir / "graph-metadata.json").read_text())["graphs"] if g["slug"] == slug
        )
        handler = functools.partial(_QuietHandler, directory=str(site))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/index.html?slug={slug}"
            base = [
                tools["chromium"],
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={tmp}/profile",
                "--window-size=1400,1000",
                "--virtual-time-budget=15000",
            ]
            dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=timeout).stdout
            m = re.search(r'<pre id="interp-report"[^>]*>(.*?)</pre>', dom, re.S)
            if not m:
                raise RuntimeError("the page never wrote its report (did it load?); DOM starts: " + dom[:300])
            import html as html_lib

            report = json.loads(html_lib.unescape(m.group(1)))
            if screenshot:
                screenshot = Path(screenshot).resolve()
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(base + [f"--screenshot={screenshot}", url], capture_output=True, timeout=timeout)
        finally:
            server.shutdown()
            server.server_close()
    threshold = meta.get("node_threshold")
    return {
        **report,
        "nodes_expected": expected_nodes(graph, threshold if isinstance(threshold, (int, float)) else None),
        "slug": slug,
        "screenshot": str(screenshot) if screenshot else None,
    }


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # keep the terminal for the report
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", help="a folder written by `interp circuits export --format circuit-tracer --out DIR`")
    ap.add_argument("--out", default=None, help="screenshot PNG to write")
    ap.add_argument("--slug", default=None, help="which graph of the folder (default: the last listed)")
    a = ap.parse_args(argv)
    try:
        result = render(a.data_dir, a.out, a.slug)
    except MissingTools as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1))
    ok = not result["errors"] and result["nodes_drawn"] == result["nodes_expected"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
