"""Pages and index: de-duplicated contexts, unclamped signed channels, unambiguous tokens, the
Neuronpedia export round trip, and the real thing in headless Chromium (sorting, filtering, searching,
escaping checked in the DOM)."""

import json
import shutil
import subprocess

import pytest
import torch

from interp.dashboards import TokenRows, Vocab, from_neuronpedia, to_neuronpedia, write_dashboard
from interp.dashboards.export import NEURONPEDIA_FEATURE_KEYS, record_as_text

EVIL = "<img src=x onerror=alert(1)>"


def _rows(n_seq=32):
    text = ["The", " cat", " sat", EVIL, " on", " &amp;", "\n", " mat"] * (2 * n_seq)
    n = len(text)
    return TokenRows(text, torch.arange(n) // 16, torch.arange(n) % 16)


def _acts(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.relu(torch.randn(n, 6, generator=g)) * 0.3
    a[3::8, 2] = 5.0 + torch.rand(len(a[3::8, 2]), generator=g)  # feature 2 fires hardest on the evil token
    a[:, 4] = 0  # dead
    a[::97, 5] = 2.0  # rare-ish
    return a


def _build(tmp_path, **kw):
    rows = _rows()
    out = write_dashboard(tmp_path / "dash", _acts(len(rows.token_text)), rows, names={2: "evil <b>2</b>"}, **kw)
    return out, json.loads((tmp_path / "dash" / "features" / "2.json").read_text())


def test_top_contexts_are_distinct_text_windows(tmp_path):
    _, rec = _build(tmp_path)
    windows = [tuple(c["tokens"]) for c in rec["top"]]
    assert len(windows) == len(set(windows)) and len(windows) >= 1
    # the corpus repeats one 8-token sentence, so few distinct windows exist although 64 rows peak
    assert len(windows) < 10
    assert all(c["tokens"][c["target"]] == c["tokens"][c["target"]] for c in rec["top"])
    assert rec["density"] in ("common", "dense") and rec["max"] > 5


def test_signed_channels_are_not_clamped(tmp_path):
    rows = _rows(4)
    n = len(rows.token_text)
    a = torch.randn(n, 3, generator=torch.Generator().manual_seed(0))
    write_dashboard(tmp_path / "s", a, rows, features=[0])
    rec = json.loads((tmp_path / "s" / "features" / "0.json").read_text())
    assert rec["signed"] and rec["min"] < 0 and rec["histogram"]["edges"][0] < 0
    assert rec["bottom"] and rec["bottom"][0]["value"] == pytest.approx(float(a[:, 0].min()), abs=1e-4)
    assert rec["freq"] == pytest.approx(float((a[:, 0] > 0).float().mean()))
    assert sum(rec["histogram"]["counts"]) == int((a[:, 0] != 0).sum())


class _Tok:
    """A tokenizer with newline, tab, byte and look-alike tokens."""

    pieces = {0: "Ċ", 1: "ĊĊ", 2: "ĉ", 3: "<0x0A>", 4: "Ġ\\n", 5: "ĠĠĠ", 6: "æ", 7: "cat"}
    texts = {0: "\n", 1: "\n\n", 2: "\t", 3: "\n", 4: " \\n", 5: "   ", 6: "\ufffd", 7: "cat"}

    def decode(self, ids):
        return "".join(self.texts[i] for i in ids)

    def convert_ids_to_tokens(self, i):
        return self.pieces[i]


def test_tokens_render_unambiguously():
    v = Vocab(_Tok())
    shown = [v.show(i) for i in range(8)]
    assert shown[:6] == ["\\n", "\\n\\n", "\\t", "<0x0A>", " \\n", "···"]
    assert shown[6] == "<0xE6>" and shown[7] == "cat"
    assert len(set(shown)) == 8  # every token looks different
    assert "id 3" in v.title(3) and "'<0x0A>'" in v.title(3)


def test_neuronpedia_export_round_trip(tmp_path):
    _, rec = _build(tmp_path)
    rec["logits"] = {"top": [[7, 1.5]], "bottom": [[3, -2.0]], "edges": [-2.0, 0.0, 2.0], "counts": [5, 9]}
    rec["tokens"].update({"7": ["cat", "cat", "id 7"], "3": ["x", "x", "id 3"]})
    np_rec = to_neuronpedia(rec, ctx_len=16, dataset="toy")
    assert tuple(np_rec) == NEURONPEDIA_FEATURE_KEYS
    assert np_rec["activations"][0]["bin_min"] == -1 and np_rec["activations"][0]["bin_max"] == rec["max"]
    assert np_rec["n_prompts_total"] == rec["n_rows"] // 16
    back = from_neuronpedia(json.loads(json.dumps(np_rec)))
    want = record_as_text(rec)
    for k in ("feature", "freq", "top", "buckets", "coact"):
        assert back[k] == want[k], k
    assert back["histogram"]["counts"] == want["histogram"]["counts"]
    assert back["histogram"]["edges"] == pytest.approx(want["histogram"]["edges"], abs=1e-4)
    assert back["logits"]["top"] == [["cat", 1.5]] and back["logits"]["edges"] == pytest.approx([-2.0, 0.0, 2.0])
    on_disk = json.loads((tmp_path / "dash" / "features" / "2.neuronpedia.json").read_text())
    assert tuple(on_disk) == NEURONPEDIA_FEATURE_KEYS
    batch = json.loads((tmp_path / "dash" / "neuronpedia_batch.json").read_text())
    assert set(batch) == {"model_id", "layer", "sae_set", "features"} and len(batch["features"]) == 6
    with pytest.raises(ValueError, match="missing"):
        from_neuronpedia({"feature_index": 1})


def test_bad_features_are_refused_before_writing(tmp_path):
    rows = _rows(2)
    with pytest.raises(ValueError, match="out of range: there are 6 features"):
        write_dashboard(tmp_path / "d", _acts(len(rows.token_text)), rows, features=[9])
    assert not (tmp_path / "d").exists()


def _dom(tmp_path, url):
    cmd = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=3000",
        "--dump-dom",
        url,
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    errors = [l for l in res.stderr.splitlines() if "CONSOLE" in l and ("ERROR" in l or "Uncaught" in l)]
    assert not errors, errors
    return res.stdout


def _order(dom, table):
    part = dom.split(f'id="{table}"', 1)[1].split('id="t-', 1)[0].split("<script", 1)[0]
    return [int(x.split('"', 1)[0]) for x in part.split('data-f="')[1:]]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (installed by the Makefile)")
def test_index_and_page_in_headless_chromium(tmp_path):
    index, _ = _build(tmp_path)
    dom = _dom(tmp_path, f"file://{index}")
    assert "<img" not in dom.split("<body", 1)[1]  # the evil token never became an element
    assert EVIL.replace("<", "&lt;").replace(">", "&gt;") in dom  # ... it is text
    assert "evil &lt;b&gt;2&lt;/b&gt;" in dom
    assert _order(dom, "t-dead") == [4]
    main = _order(dom, "t-main") + _order(dom, "t-dense")
    assert sorted(main) == [0, 1, 2, 3, 5]
    # sorting and filtering are driven through the URL fragment
    by_max = _order(_dom(tmp_path, f"file://{index}#sort=max&dir=asc&cls=rare,sparse,common,dense"), "t-dense")
    stats = {f: json.loads((tmp_path / "dash" / "features" / f"{f}.json").read_text()) for f in range(6)}
    dense = [f for f in range(6) if stats[f]["density"] == "dense"]
    assert by_max == sorted(dense, key=lambda f: stats[f]["max"])
    only = _dom(tmp_path, f"file://{index}#q=onerror")
    shown = _order(only, "t-main") + _order(only, "t-dense") + _order(only, "t-dead")
    assert 2 in shown and 4 not in shown
    none_dense = _dom(tmp_path, f"file://{index}#cls=dead")
    assert _order(none_dense, "t-dense") == [] and _order(none_dense, "t-dead") == [4]
    page = _dom(tmp_path, f"file://{tmp_path / 'dash' / 'features' / '2.html'}")
    assert "<img" not in page.split("<body", 1)[1] and "onerror=alert(1)&gt;" in page
    assert 'class="esc"' in page  # the newline token is shown as an escape
    assert "../index.html" in page and "firing rate by position" in page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (installed by the Makefile)")
def test_page_fits_1400px_without_clipping(tmp_path):
    index, _ = _build(tmp_path)
    page = tmp_path / "dash" / "features" / "2.html"
    probe = page.read_text().replace(
        "</body>",
        "<script>document.title = [document.documentElement.scrollWidth,"
        " Math.max(...[...document.querySelectorAll('svg.chart')].map(s => "
        "s.getBoundingClientRect().right))].join(',');</script></body>",
    )
    page.write_text(probe)
    dom = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'p2'}",
            "--window-size=1400,900",
            "--dump-dom",
            f"file://{page}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    width, right = (float(x) for x in dom.split("<title>", 1)[1].split("</title>", 1)[0].split(","))
    assert width <= 1400 and right <= 1400


def test_repeated_windows_collapse_into_one_row_with_a_count():
    from interp.dashboards import DashboardConfig, TensorSource, collect
    from interp.dashboards.build import records
    from interp.dashboards.page import feature_fragment

    # a boilerplate line (ids 1..8) fills sequences 0-5, sequences 6-7 hold other text; feature 0 fires on id 4
    ids = torch.tensor(list(range(1, 9)) * 12 + list(range(20, 36)) + list(range(40, 56)))
    seq, pos = torch.arange(len(ids)) // 16, torch.arange(len(ids)) % 16
    a = torch.zeros(len(ids), 1)
    g = torch.Generator().manual_seed(0)
    a[ids == 4, 0] = 1 + torch.rand(int((ids == 4).sum()), generator=g)
    a[(ids == 25) | (ids == 29) | (ids == 45) | (ids == 49), 0] = 5 + torch.rand(
        4, generator=g
    )  # the best windows are unique ones
    src = TensorSource(a, ids, seq, pos)
    cfg = DashboardConfig(features=[0])
    stats = collect(src, 1, cfg.stats, progress=False)
    rec = records(stats, src, Vocab(), [0], cfg)[0]
    top = rec["top"]
    kept = len(stats.top.entries(0))
    assert sum(c["count"] for c in top) == kept == len(ids[ids == 4]) + 4  # every kept row is in one row
    windows = [(c["target"], tuple(c["tokens"])) for c in top]
    assert len(windows) == len(set(windows))
    assert [c["value"] for c in top] == sorted((c["value"] for c in top), reverse=True)  # order by max kept
    assert [c["count"] for c in top[:4]] == [1, 1, 1, 1] and max(c["count"] for c in top) > 1
    # the boilerplate's windows: the two in-sequence positions of id 4 (3 and 11), six sequences each
    rep = [c for c in top if c["count"] > 1]
    assert sorted(c["count"] for c in rep) == [6, 6] and all(c["tokens"][c["target"]] == 4 for c in rep)
    html = feature_fragment(rec).split("Activation quantiles")[0]  # the top list (buckets count their samples)
    assert html.count('class="dup"') == 2 and ">×6</span>" in html
