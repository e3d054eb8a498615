"""The C²R frontier experiment trains with the paper's settings or, with --defaults, the toolkit's."""

import json

from sae.experiments import c2r_frontier


def _run(tmp_path, *extra):
    out = tmp_path / "f.json"
    args = ["--ks", "3", "--seeds", "0", "--n", "4096", "--d-sae", "32", "--steps", "4", "--batch-size", "512"]
    c2r_frontier.main([*args, *extra, "--out", str(out)])
    return json.loads(out.read_text())


def test_paper_and_default_settings_are_recorded_and_differ(tmp_path, monkeypatch):
    seen = []
    real = c2r_frontier.train_sae

    def spy(store, cfg, out, **kw):
        seen.append(cfg)
        return real(store, cfg, out, **kw)

    monkeypatch.setattr(c2r_frontier, "train_sae", spy)
    paper = _run(tmp_path / "p")
    default = _run(tmp_path / "d", "--defaults")
    assert {r["settings"] for r in paper["rows"]} == {"paper"}
    assert {r["settings"] for r in default["rows"]} == {"defaults"}
    p_c2r, d_c2r = seen[1], seen[3]
    assert p_c2r.arch == d_c2r.arch == "c2r"
    assert p_c2r.settings["c2r_ref_batch"] == 2048 and "c2r_ref_batch" not in d_c2r.settings
    assert p_c2r.settings["auxk_style"] == "official" and "auxk_style" not in d_c2r.settings
    assert p_c2r.dead_window_tokens == 200_000 and d_c2r.dead_window_tokens is None
    assert d_c2r.settings["c2r_lambda"] == p_c2r.settings["c2r_lambda"] == 5.0
    for r in paper["rows"] + default["rows"]:
        assert 0 <= r["dead_frac"] <= 1 and r["fvu"] > 0
