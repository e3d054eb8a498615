"""Crafted GGUF headers (issue 29 cause 5): lengths bounded by the file size, nested arrays walked without
recursion, truncation and garbage named; `interp cache --model bad.gguf` is one error line, exit 2."""

from __future__ import annotations

import os
import struct

import pytest

from tests.reliability.refusals import assert_refused, invoke, snapshot


def _header(n_kv, body):
    return b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv) + body


def _key(name):
    return struct.pack("<Q", len(name)) + name.encode()


def _nested(depth):
    body = _key("deep") + struct.pack("<I", 9)
    body += struct.pack("<IQ", 9, 1) * depth + struct.pack("<IQ", 4, 0)
    return body


CASES = {
    "huge_key_length": _header(1, struct.pack("<Q", 1 << 40) + b"x" * 16),
    "huge_string": _header(1, _key("a") + struct.pack("<IQ", 8, 1 << 40)),
    "huge_array": _header(1, _key("a") + struct.pack("<IIQ", 9, 4, 1 << 50)),
    "huge_kv_count": _header(1 << 60, b""),
    "nested_arrays": _header(1, _nested(20_000)),
    "truncated_header": b"GGUF" + struct.pack("<I", 3),
    "truncated_value": _header(1, _key("general.file_type") + struct.pack("<I", 4) + b"\x01"),
    "unknown_type": _header(1, _key("a") + struct.pack("<I", 99)),
    "garbage_after_magic": b"GGUF" + os.urandom(2048),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_crafted_header_is_a_value_error_naming_the_file(tmp_path, case):
    from interp.models.gguf import gguf_file_type

    path = tmp_path / "m.gguf"
    path.write_bytes(CASES[case])
    try:
        got = gguf_file_type(path)
    except ValueError as e:
        assert str(path) in str(e) and "\n" not in str(e)
    else:
        # a deep but well-formed nesting parses (no RecursionError); random bytes may parse as an odd header
        assert case in ("nested_arrays", "garbage_after_magic") and isinstance(got, str)


def test_nested_arrays_that_do_fit_are_skipped(tmp_path):
    from interp.models.gguf import gguf_file_type

    body = _nested(20_000) + _key("general.file_type") + struct.pack("<II", 4, 3)
    (tmp_path / "m.gguf").write_bytes(_header(2, body))
    assert gguf_file_type(tmp_path / "m.gguf") == "Q4_1"


@pytest.mark.parametrize("case", ["huge_key_length", "nested_arrays", "truncated_header", "garbage_after_magic"])
def test_interp_cache_on_a_crafted_gguf_is_one_error_line(tmp_path, case):
    path = tmp_path / "m.gguf"
    path.write_bytes(CASES[case])
    before = snapshot(tmp_path)
    r = invoke(
        [
            "cache",
            "--model",
            path,
            "--hooks",
            "blocks.0.hook_resid_post",
            "--data",
            "synthetic",
            "--max-tokens",
            "64",
            "--out",
            tmp_path / "store",
        ]
    )
    assert_refused(r, str(path))
    assert snapshot(tmp_path) == before
