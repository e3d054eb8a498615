"""The CLI cases a newcomer met (issue 41): each refusal names the flag and the fix, in one `error:` line, exit 2,
and no command succeeds on an input it ignored; the disk is left as it was."""

from __future__ import annotations

import pytest

from tests.reliability.refusals import assert_refused, invoke, snapshot


@pytest.mark.parametrize("command", [["circuits", "curve", "--task", "ioi"], ["circuits", "features", "--quick"]])
def test_a_bad_size_list_names_the_flag_and_the_bad_item(tmp_path, command):
    before = snapshot(tmp_path)
    r = invoke([*command, "--model", "pythia-14m-init", "--sizes", "10,abc", "--out", tmp_path / "o"])
    assert_refused(r, "--sizes '10,abc'", "'abc' is not a positive whole number", "--sizes 10,30,100")
    assert snapshot(tmp_path) == before


def test_features_quick_refuses_the_sae_folders_it_would_ignore(tmp_path):
    before = snapshot(tmp_path)
    r = invoke(["circuits", "features", "--quick", "--sae", tmp_path / "missing", "--out", tmp_path / "o"])
    assert_refused(r, "would ignore --sae", "give --model SPEC")
    assert snapshot(tmp_path) == before


def test_query_on_a_folder_that_is_no_store_says_gradient_store(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "q.safetensors").write_bytes(b"")
    before = snapshot(tmp_path)
    r = invoke(
        ["attribute", "query", "--store", tmp_path / "empty", "--queries", f"tokens:{tmp_path / 'q.safetensors'}"]
    )
    assert_refused(r, "is not a gradient store", "interp attribute build --out DIR")
    assert snapshot(tmp_path) == before


def test_build_into_a_file_says_out_takes_a_folder(tmp_path):
    (tmp_path / "afile").write_text("x")
    before = snapshot(tmp_path)
    r = invoke(["attribute", "build", "--model", "pythia-14m-init", "--train", "t", "--out", tmp_path / "afile"])
    assert_refused(r, "--out", "is a file", "takes a folder")
    assert snapshot(tmp_path) == before
