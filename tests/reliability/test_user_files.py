"""The user's own files (issue 29 causes 6, 7 and 14): damaged `hf-disk:` folders, non-UTF-8 `jsonl:`,
`csv:` and prompt files, and prompt rows whose answer and wrong answer share their first token are one
error naming the file (or the row and the token); `interp cache` and `interp circuits extract` exit 2
and write nothing."""

from __future__ import annotations

import json
import os

import pytest

from tests.reliability.refusals import assert_refused, invoke, snapshot


def _hf_disk(root, damage):
    from datasets import Dataset

    folder = root / "ds"
    Dataset.from_dict({"text": ["one document", "another one"]}).save_to_disk(str(folder))
    if damage == "arrow_garbage":
        arrow = next(folder.glob("*.arrow"))
        arrow.write_bytes(os.urandom(arrow.stat().st_size))
    elif damage == "info_list":
        (folder / "dataset_info.json").write_text("[1, 2]")
    elif damage == "state_list":
        (folder / "state.json").write_text("[]")
    elif damage == "state_truncated":
        (folder / "state.json").write_text((folder / "state.json").read_text()[:20])
    return f"hf-disk:{folder}", str(folder)


def _bad_bytes(root, kind):
    if kind == "jsonl":
        (root / "d.jsonl").write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
        return f"jsonl:{root}/d.jsonl", f"{root}/d.jsonl line 2"
    (root / "d.csv").write_bytes(b"text\nfine\ncaf\xe9 au lait\n")
    return f"csv:{root}/d.csv:text", f"{root}/d.csv"


@pytest.mark.parametrize("damage", ["arrow_garbage", "info_list", "state_list", "state_truncated"])
def test_damaged_hf_disk_folder_names_the_folder(tmp_path, damage):
    from interp.data import byte_tokenizer, resolve_corpus

    spec, folder = _hf_disk(tmp_path, damage)
    with pytest.raises(ValueError) as err:
        resolve_corpus(spec, byte_tokenizer(), ctx_len=4, max_tokens=8)
    assert folder in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_non_utf8_user_file_names_the_file(tmp_path, kind):
    from interp.data import byte_tokenizer, resolve_corpus

    spec, where = _bad_bytes(tmp_path, kind)
    with pytest.raises(ValueError, match="not UTF-8") as err:
        resolve_corpus(spec, byte_tokenizer(), ctx_len=4, max_tokens=8)
    assert where in str(err.value)


@pytest.mark.parametrize("case", ["hf_arrow_garbage", "hf_info_list", "jsonl_bytes", "csv_bytes"])
def test_interp_cache_on_a_bad_user_file_exits_2_and_writes_nothing(tmp_path, case):
    if case.startswith("hf_"):
        spec, needle = _hf_disk(tmp_path, case[3:])
    else:
        spec, needle = _bad_bytes(tmp_path, case.split("_")[0])
    before = snapshot(tmp_path)
    r = invoke(
        [
            "cache",
            "--model",
            "pythia-14m-init",
            "--data",
            spec,
            "--hooks",
            "blocks.0.hook_resid_post",
            "--max-tokens",
            "64",
            "--ctx-len",
            "16",
            "--out",
            tmp_path / "store",
        ]
    )
    assert_refused(r, needle)
    assert snapshot(tmp_path) == before


def _prompts(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROW = {"clean": "When Mary and John went, John gave it to", "corrupt": "When Mary and John went, Anna gave it to"}


def test_answer_and_wrong_sharing_a_first_token_is_refused_naming_row_and_token():
    from circuits.tasks.pairs import PairError, encode_pairs
    from interp.data import byte_tokenizer

    tok = byte_tokenizer()  # one byte per token: " Mary" and " Mark" both start with " "
    good = {**ROW, "answer": "Mary", "wrong": "John"}
    with pytest.raises(PairError, match=r"row 1: .*' Mary'.*' Mark'.*first token 32 \(' '\)"):
        encode_pairs(tok, [good, {**ROW, "answer": " Mary", "wrong": " Mark"}])
    assert len(encode_pairs(tok, [good])) == 1


@pytest.mark.parametrize("case", ["shared_first_token", "not_utf8"])
def test_circuits_extract_refuses_a_bad_prompts_file_before_writing(tmp_path, case):
    path = tmp_path / "p.jsonl"
    if case == "shared_first_token":
        _prompts(path, [{**ROW, "answer": " Mary", "wrong": " Mark"}])
        needle = "row 0"
    else:
        path.write_bytes(json.dumps({**ROW, "answer": " A", "wrong": " B"}).encode() + b"\n\xff\xfe\n")
        needle = f"{path}:2 is not UTF-8"
    before = snapshot(tmp_path)
    r = invoke(
        [
            "circuits",
            "extract",
            "--task",
            f"prompts:{path}",
            "--model",
            "pythia-14m-init",
            "--method",
            "eap",
            "--out",
            tmp_path / "circ",
        ]
    )
    assert_refused(r, needle)
    assert snapshot(tmp_path) == before
