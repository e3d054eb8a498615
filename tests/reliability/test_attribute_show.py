"""`interp attribute show` on damaged runs (issue 29 cause 4): one error line naming the file, exit 2,
nothing written (no report.html)."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import save_file

from tests.reliability.refusals import assert_refused, invoke, snapshot


def _run(folder, scores=None, result=None, texts=None, sdi=None):
    folder.mkdir()
    scores = torch.randn(6, 2) if scores is None else scores
    tensors = {"scores": scores} if sdi is None else {"scores": scores, "sdi": sdi}
    save_file(tensors, str(folder / "scores.safetensors"))
    result = (
        {"method": "tracin", "n_train": 6, "n_queries": 2, "identity": {"model": {"spec": "m"}, "data": {}}}
        if result is None
        else result
    )
    (folder / "result.json").write_text(json.dumps(result) if not isinstance(result, str) else result)
    texts = {"train": [f"t{i}" for i in range(6)], "queries": ["q0", "q1"]} if texts is None else texts
    (folder / "texts.json").write_text(json.dumps(texts))
    return folder


CASES = {
    "scores_garbage": (lambda f: (f / "scores.safetensors").write_bytes(os.urandom(300)), "scores.safetensors"),
    "scores_truncated": (
        lambda f: (f / "scores.safetensors").write_bytes((f / "scores.safetensors").read_bytes()[:-9]),
        "scores.safetensors",
    ),
    "result_list": (lambda f: (f / "result.json").write_text("[1]"), "result.json"),
    "result_truncated": (lambda f: (f / "result.json").write_text('{"method": "tra'), "result.json"),
    "too_few_texts": (
        lambda f: (f / "texts.json").write_text(json.dumps({"train": ["a"], "queries": ["q0", "q1"]})),
        "texts.json",
    ),
    "texts_not_strings": (
        lambda f: (f / "texts.json").write_text(json.dumps({"train": [1] * 6, "queries": ["a", "b"]})),
        "texts.json",
    ),
    "nan_scores": (
        lambda f: save_file({"scores": torch.full((6, 2), float("nan"))}, str(f / "scores.safetensors")),
        "non-finite",
    ),
    "scores_1d": (lambda f: save_file({"scores": torch.randn(6)}, str(f / "scores.safetensors")), "scores.safetensors"),
    "method_not_string": (
        lambda f: (f / "result.json").write_text(json.dumps({"method": ["x"], "identity": {}})),
        "result.json",
    ),
    "identity_list": (
        lambda f: (f / "result.json").write_text(json.dumps({"method": "x", "identity": []})),
        "result.json",
    ),
    "shape_vs_result": (
        lambda f: (f / "result.json").write_text(json.dumps({"method": "x", "n_train": 60})),
        "not from the same run",
    ),
    "sdi_2d": (
        lambda f: save_file({"scores": torch.randn(6, 2), "sdi": torch.randn(6, 2)}, str(f / "scores.safetensors")),
        "sdi",
    ),
}


def test_a_good_run_shows(tmp_path):
    r = invoke(["attribute", "show", _run(tmp_path / "run")])
    assert r.exit_code == 0 and (tmp_path / "run" / "report.html").is_file(), r.output


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_run_is_one_error_naming_the_file(tmp_path, case):
    damage, needle = CASES[case]
    run = _run(tmp_path / "run")
    damage(run)
    before = snapshot(tmp_path)
    assert_refused(invoke(["attribute", "show", run]), needle)
    assert snapshot(tmp_path) == before
