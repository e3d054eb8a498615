"""The user's own data as a text source: JSONL, Parquet, CSV and saved `datasets` folders.

Specs (PATH may be relative; the part after the last ':' is the field when PATH alone is not a file):

- ``jsonl:PATH[:field]``: one JSON object per line, text in ``field`` (default ``text``);
- ``parquet:PATH[:column]``: a Parquet file, text in ``column`` (default ``text``, or the only column);
  only that column is read;
- ``csv:PATH:column``: a CSV file with a header row; the column must be named;
- ``hf-disk:PATH[:split:column]``: a folder written by ``datasets``' ``save_to_disk`` (a ``Dataset``
  or a ``DatasetDict``; split default: ``train``, else the only split; column default as for Parquet).

Each row is one document, addressed as ``PATH#ROW``, so a corpus built from these files is chunked,
shuffled and seeded exactly like the built-in ones (``interp.data.corpus.build_corpus``). Empty and
null texts are skipped; a value that is not text is an error naming its row. Rows are read once, on
first use, and kept in memory (a corpus of a few million tokens is tens of MB of text).

    >>> src = get_user_source("jsonl:notes.jsonl:body")
    >>> next(iter(src))
    ('notes.jsonl#0', 'first note ...')
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

USER_PREFIXES = ("jsonl:", "parquet:", "csv:", "hf-disk:")
"""Spec prefixes this module reads."""

USER_SPECS = ("jsonl:PATH[:field]", "parquet:PATH[:column]", "csv:PATH:column", "hf-disk:PATH[:split:column]")
"""How the specs are written (for error messages and --help)."""


def split_path_spec(rest: str, n_fields: int) -> tuple[str, list[str]]:
    """("path", [fields...]): the longest prefix of `rest` that exists is the path; at most `n_fields` after it."""
    parts = rest.split(":")
    for cut in range(len(parts), max(len(parts) - n_fields, 1) - 1, -1):
        path = ":".join(parts[:cut])
        if os.path.exists(os.path.expanduser(path)):
            return os.path.expanduser(path), parts[cut:]
    path = ":".join(parts[: max(len(parts) - n_fields, 1)])
    raise ValueError(f"not found: {path!r}; give an existing file or folder, e.g. {USER_SPECS[0]}")


def _texts_source(spec: str, path: str, rows: Callable[[], list[str | None]]):
    """A `TextSource` over the rows of one file (read once, on first use)."""
    from interp.data.text_source import TextSource

    texts = lru_cache(maxsize=1)(rows)
    n = len(texts())
    if n == 0:
        raise ValueError(f"{spec}: the file has no rows")
    ids = tuple(f"{path}#{i}" for i in range(n))
    return TextSource(spec, ids, lambda doc_id: texts()[int(doc_id.rsplit("#", 1)[1])] or "")


def default_column(names: list[str]) -> str:
    """The column read when none is named: "text", else the only column there is."""
    return "text" if "text" in names or len(names) != 1 else names[0]


def _check_text(value: object, where: str, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where}: {field!r} holds a {type(value).__name__}, not text; choose a text field")


def _utf8(raw: bytes, path: str, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path} line {lineno} is not UTF-8 text (byte {e.start} of the line); save the file as UTF-8"
        ) from None


def jsonl_source(spec: str, rest: str):
    path, fields = split_path_spec(rest, 1)
    field = fields[0] if fields else "text"

    def rows() -> list[str | None]:
        out = []
        with open(path, "rb") as f:
            for i, raw in enumerate(f):
                line = _utf8(raw, path, i + 1)
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(
                        f"{path} line {i + 1} is not JSON ({e.msg}); a .jsonl file has one object per line"
                    ) from None
                if not isinstance(obj, dict) or field not in obj:
                    keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
                    raise ValueError(
                        f"{path} line {i + 1} has no field {field!r} (it has {keys}); write jsonl:{path}:FIELD"
                    )
                out.append(_check_text(obj[field], f"{path} line {i + 1}", field))
        return out

    return _texts_source(spec, path, rows)


def parquet_source(spec: str, rest: str):
    path, fields = split_path_spec(rest, 1)
    column = fields[0] if fields else None

    def rows() -> list[str | None]:
        import pyarrow.parquet as pq

        nonlocal column
        try:
            names = pq.read_schema(path).names
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise ValueError(f"{path} is not a Parquet file ({e})") from None
        column = column or default_column(names)
        if column not in names:
            raise ValueError(f"{path} has no column {column!r} (columns: {names}); write parquet:{path}:COLUMN")
        values = pq.read_table(path, columns=[column]).column(column).to_pylist()
        return [_check_text(v, f"{path} row {i}", column) for i, v in enumerate(values)]

    return _texts_source(spec, path, rows)


def csv_source(spec: str, rest: str):
    path, fields = split_path_spec(rest, 1)
    if not fields:
        raise ValueError(f"csv:{path} needs the column holding the text: write csv:{path}:COLUMN")
    column = fields[0]

    def rows() -> list[str | None]:
        csv.field_size_limit(1 << 30)  # documents can be long
        with open(path, encoding="utf-8", newline="") as f:
            try:
                reader = csv.DictReader(f)
                if reader.fieldnames is None or column not in reader.fieldnames:
                    raise ValueError(
                        f"{path} has no column {column!r} (header: {reader.fieldnames}); write csv:{path}:COLUMN"
                    )
                return [row[column] for row in reader]
            except UnicodeDecodeError:
                raise ValueError(
                    f"{path} is not UTF-8 text (after row {reader.line_num} of the file); save the file as UTF-8"
                ) from None
            except csv.Error as e:
                raise ValueError(f"{path} row {reader.line_num} is not valid CSV ({e})") from None

    return _texts_source(spec, path, rows)


def hf_disk_source(spec: str, rest: str):
    path, fields = split_path_spec(rest, 2)
    if not Path(path).is_dir():
        raise ValueError(f"hf-disk:{path} must be a folder written by datasets' save_to_disk")
    split = fields[0] if len(fields) == 2 else None
    column = fields[-1] if fields else None
    if len(fields) == 1:
        raise ValueError(f"hf-disk takes PATH or PATH:split:column, got {spec!r}")

    def rows() -> list[str | None]:
        try:
            return _hf_disk_rows(path, split, column)
        except (ValueError, OSError, AttributeError, KeyError, TypeError, IndexError) as e:  # damaged arrow or JSON
            if isinstance(e, ValueError) and path in str(e) or isinstance(e, OSError) and e.errno is not None:
                raise  # ours (names the folder); disk full, permission denied: the CLI names those itself
            first = (str(e).strip().splitlines() or [""])[0][:160]
            raise ValueError(
                f"hf-disk:{path} cannot be read as a saved dataset ({type(e).__name__}: {first}); "
                "is the folder damaged? Write it again with save_to_disk"
            ) from None

    return _texts_source(spec, path, rows)


def _hf_disk_rows(path: str, split: str | None, column: str | None) -> list[str | None]:
    from datasets import DatasetDict, load_from_disk

    try:
        ds = load_from_disk(path)
    except FileNotFoundError as e:
        raise ValueError(f"{path} is not a saved dataset ({e}); make it with Dataset.save_to_disk") from None
    if isinstance(ds, DatasetDict):
        name = split or ("train" if "train" in ds else next(iter(ds)) if len(ds) == 1 else None)
        if name not in ds:
            raise ValueError(f"{path} has splits {list(ds)}; write hf-disk:{path}:SPLIT:COLUMN")
        ds = ds[name]
    elif split is not None and split not in ("", "train"):
        raise ValueError(f"{path} is a single Dataset with no split {split!r}; write hf-disk:{path}")
    column = column or default_column(ds.column_names)
    if column not in ds.column_names:
        raise ValueError(
            f"{path} has no column {column!r} (columns: {ds.column_names}); write hf-disk:{path}:SPLIT:COLUMN"
        )
    return [_check_text(v, f"{path} row {i}", column) for i, v in enumerate(ds[column])]


_READERS = {"jsonl:": jsonl_source, "parquet:": parquet_source, "csv:": csv_source, "hf-disk:": hf_disk_source}


def get_user_source(spec: str):
    """The `TextSource` of a user-data spec (one of `USER_SPECS`)."""
    for prefix, make in _READERS.items():
        if spec.startswith(prefix):
            return make(spec, spec[len(prefix) :])
    raise ValueError(f"not a user-data spec: {spec!r}; use one of {', '.join(USER_SPECS)}")
