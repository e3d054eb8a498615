"""The user's own data: jsonl / parquet / csv / hf-disk specs on small files written here."""

import json

import pytest
import torch

from interp.data import get_source, resolve_corpus

DOCS = ["the first document, about cats", "a second one, about dogs", "", "third: birds and more birds"]


def build(spec, tok, **kw):
    return resolve_corpus(spec, tok, ctx_len=8, max_tokens=kw.pop("max_tokens", 64), seed=kw.pop("seed", 0), **kw)


@pytest.fixture
def files(tmp_path):
    jl = tmp_path / "docs.jsonl"
    jl.write_text("\n".join(json.dumps({"body": d, "id": i}) for i, d in enumerate(DOCS)) + "\n")
    csv_file = tmp_path / "docs.csv"
    csv_file.write_text("id,body\n" + "".join(f'{i},"{d}"\n' for i, d in enumerate(DOCS)))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": DOCS, "n": list(range(len(DOCS)))}), tmp_path / "docs.parquet")
    from datasets import Dataset, DatasetDict

    DatasetDict(
        {"train": Dataset.from_dict({"body": DOCS}), "test": Dataset.from_dict({"body": DOCS[:1]})}
    ).save_to_disk(str(tmp_path / "dd"))
    Dataset.from_dict({"text": DOCS}).save_to_disk(str(tmp_path / "ds"))
    return tmp_path


def test_every_format_yields_the_same_documents(files):
    want = [d for d in DOCS if d]
    for spec in (
        f"jsonl:{files}/docs.jsonl:body",
        f"csv:{files}/docs.csv:body",
        f"parquet:{files}/docs.parquet",
        f"parquet:{files}/docs.parquet:text",
        f"hf-disk:{files}/dd",
        f"hf-disk:{files}/dd:train:body",
        f"hf-disk:{files}/ds",
    ):
        src = get_source(spec)
        assert [text for _, text in src] == want, spec
        assert len(src) == len(DOCS)
    assert [t for _, t in get_source(f"hf-disk:{files}/dd:test:body")] == DOCS[:1]


def test_corpora_are_chunked_and_seeded_like_the_builtin_ones(files, tok):
    a = build(f"jsonl:{files}/docs.jsonl:body", tok, seed=1)
    b = build(f"parquet:{files}/docs.parquet", tok, seed=1)
    c = build(f"jsonl:{files}/docs.jsonl:body", tok, seed=2)
    assert a.tokens.shape[1] == 8 and torch.equal(a.tokens, b.tokens)  # same rows -> same corpus
    assert a.digest() != c.digest()  # another seed shuffles the documents differently
    assert a.describe()["source"].startswith("jsonl:")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("jsonl:{d}/docs.jsonl:title", "no field 'title'"),
        ("jsonl:{d}/docs.jsonl:id", "holds a int, not text"),
        ("jsonl:{d}/missing.jsonl", "not found"),
        ("csv:{d}/docs.csv", "needs the column"),
        ("csv:{d}/docs.csv:title", "no column 'title'"),
        ("parquet:{d}/docs.parquet:n", "not text"),
        ("parquet:{d}/docs.jsonl", "not a Parquet file"),
        ("hf-disk:{d}/dd:valid:body", "has splits"),
        ("hf-disk:{d}/ds:train:title", "no column 'title'"),
        ("hf-disk:{d}/docs.csv", "must be a folder"),
    ],
)
def test_bad_specs_say_what_to_write(files, spec, message):
    with pytest.raises(ValueError, match=message):
        list(get_source(spec.format(d=files)))


def test_bad_json_line_is_named(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"text": "ok"}\n{oops\n')
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        list(get_source(f"jsonl:{tmp_path}/x.jsonl"))


def test_cache_cli_reads_user_data(files, tmp_path):
    from typer.testing import CliRunner

    from interp.cli.main import app
    from interp.store import ActivationStore

    out = tmp_path / "store"
    res = CliRunner().invoke(
        app,
        [
            "cache",
            "--model",
            "pythia-14m-init",
            "--data",
            f"jsonl:{files}/docs.jsonl:body",
            "--ctx-len",
            "8",
            "--max-tokens",
            "32",
            "--hooks",
            "blocks.0.hook_resid_post",
            "--out",
            str(out),
            "--device",
            "cpu",
        ],
    )
    assert res.exit_code == 0, res.output
    st = ActivationStore.open(out)
    assert len(st) == 32 and st.meta.data["source"].startswith("jsonl:")
