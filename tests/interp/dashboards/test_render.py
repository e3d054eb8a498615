"""Dashboards: structure, escaping, and a real render in headless Chromium."""

import json
import shutil
import subprocess

import pytest
import torch

from interp.dashboards import TokenRows, write_dashboard

EVIL = "<script>alert(1)</script>"


def _rows():
    text = ["The", " cat", " sat", EVIL, " on", " &amp;", "\n", " mat"] * 4
    n = len(text)
    return TokenRows(text, torch.arange(n) // 8, torch.arange(n) % 8)


def _acts():
    g = torch.Generator().manual_seed(0)
    a = torch.relu(torch.randn(32, 5, generator=g))
    a[3::8, 2] = 5.0  # feature 2 fires hardest on the evil token
    return a


def test_page_escapes_token_text_and_links_sections(tmp_path):
    out = write_dashboard(tmp_path / "d.html", _acts(), _rows(), features=[0, 2], names={2: "evil <b>2</b>"},
                          logit_effects={2: {"top": [(" yes", 1.5)], "bottom": [("</script>", -2.0)]}})
    page = out.read_text()
    body = page.split("</head>", 1)[1]
    assert EVIL not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "evil &lt;b&gt;2&lt;/b&gt;" in body and "&amp;amp;" in body
    assert 'id="f2"' in body and 'href="#f2"' in body
    hists = json.loads(body.split('id="hists">', 1)[1].split("</script>", 1)[0])
    assert sum(hists["2"]["y"]) == int((_acts()[:, 2] > 0).sum())


def test_bad_shapes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="one row per token"):
        write_dashboard(tmp_path / "d.html", torch.zeros(3, 2), _rows())
    with pytest.raises(ValueError, match="out of range"):
        write_dashboard(tmp_path / "d.html", _acts(), _rows(), features=[9])
    assert not (tmp_path / "d.html").exists()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (installed by the Makefile)")
def test_renders_in_headless_chromium_with_script_token_as_text(tmp_path):
    out = write_dashboard(tmp_path / "d.html", _acts(), _rows(), features=[0, 1, 2])
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=3000", "--dump-dom", f"file://{out}#f2"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    dom = res.stdout
    assert "<h2>feature 2</h2>" in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown as text, never parsed as a tag
    assert 'class="main-svg"' in dom  # plotly drew the histogram of the opened section
    errors = [l for l in res.stderr.splitlines() if "CONSOLE" in l and ("ERROR" in l or "Uncaught" in l)]
    assert not errors, errors
