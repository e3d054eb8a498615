"""`sae.experiments.top_rows`: the row that tops most latents' pages is found; dead latents do not count."""

import json

import pytest

from sae.experiments.top_rows import top_rows


def test_the_most_common_top_row_and_dead_latents(tmp_path):
    feats = tmp_path / "features"
    feats.mkdir()
    tops = [[{"row": 7, "pos": 1}], [{"row": 7, "pos": 1}, {"row": 3, "pos": 9}], [{"row": 3, "pos": 9}], []]
    for i, top in enumerate(tops):
        (feats / f"{i}.json").write_text(json.dumps({"top": top}))
        (feats / f"{i}.neuronpedia.json").write_text("{}")
    res = top_rows(tmp_path)
    assert res["live"] == 3 and (res["top_row"], res["pos"], res["latents"]) == (7, 1, 2)
    assert res["next"] == [{"row": 3, "pos": 9, "latents": 1}]
    with pytest.raises(ValueError, match="no feature pages"):
        top_rows(tmp_path / "empty")


def test_a_folder_without_pages_is_one_error_line(tmp_path, capsys):
    from sae.experiments.top_rows import main

    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--top N" in err and len(err.splitlines()) == 1
