"""`interp sae dashboard` against `interp sae eval` on a store with special rows: the same rows (the first
ordinary rows of the split), the same rule, the same codes, hence the same FVU and L0 in the header."""

import json

import torch
from typer.testing import CliRunner

from interp.store import ActivationStore, StoreMeta, write_shard_file
from sae.cli import app

runner = CliRunner()


def _store(path, n_seq=64, ctx=8, d=16):
    meta = StoreMeta(
        model="synthetic", model_sha256="-", hooks={"h": [d]}, dtype="float32", tokenizer="-", ctx_len=ctx, data={}
    )
    st = ActivationStore.open_or_create(path, meta, n_shards_planned=2)
    g = torch.Generator().manual_seed(0)
    half = n_seq * ctx // 2
    for i in range(2):
        x = torch.relu(torch.randn(half, 24, generator=g)) @ torch.randn(24, d, generator=g)
        x[::ctx] *= 80  # position 0: an attention-sink row with a massive norm
        x[5::37] *= 30  # and a few massive rows elsewhere
        seq = torch.arange(i * half, (i + 1) * half) // ctx
        st.commit_shard(
            write_shard_file(
                st.path,
                i,
                {
                    "h": x,
                    "tokens": torch.randint(0, 50, (half,), generator=g, dtype=torch.int32),
                    "seq": seq,
                    "pos": (torch.arange(half) % ctx).int(),
                },
            )
        )
    return st


def test_header_equals_sae_eval_with_special_rows(tmp_path):
    _store(tmp_path / "store")
    r = runner.invoke(
        app,
        [
            "train",
            "--store",
            str(tmp_path / "store"),
            "--arch",
            "batchtopk",
            "--out",
            str(tmp_path / "sae"),
            "--d-sae",
            "32",
            "--k",
            "4",
            "--max-tokens",
            "2048",
            "--batch-size",
            "128",
        ],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        [
            "eval",
            "--sae",
            str(tmp_path / "sae"),
            "--store",
            str(tmp_path / "store"),
            "--max-rows",
            "200",
            "--out",
            str(tmp_path / "m"),
        ],
    )
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert m["rows_excluded"] > 0 and m["rows"] == 200
    r = runner.invoke(
        app,
        [
            "dashboard",
            "--sae",
            str(tmp_path / "sae"),
            "--store",
            str(tmp_path / "store"),
            "--max-rows",
            "200",
            "--out",
            str(tmp_path / "d"),
            "--top",
            "3",
        ],
    )
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "d" / "dashboard.json").read_text())
    assert s["header"]["rows rule"] == m["row_rule"]["exclude"] == "positions:0+norm-outliers:10"
    assert s["recon"]["rows"] == m["rows"] == 200
    assert abs(s["recon"]["fvu"] - m["fvu"]) < 1e-4 and abs(s["recon"]["l0"] - m["l0"]) < 1e-4
    rec = json.loads((tmp_path / "d" / "features" / f"{s['pages'][0]}.json").read_text())
    assert rec["n_rows"] == 200 and all(c["pos"] != 0 for c in rec["top"])  # sink rows never among the examples
    # one page inline (store found through the SAE's train_config.json, recorded relative to its folder)
    from sae.dashboard import feature_page

    page = feature_page(str(tmp_path / "sae"), s["pages"][0], max_rows=200)
    html = page._repr_html_()
    assert page.record["feature"] == s["pages"][0] and page.record["n_rows"] == 200
    assert html.startswith("<style>") and "Top activations" in html and "<script" not in html


def test_text_view_lists_dense_latents_last():
    from interp.dashboards import Vocab
    from interp.dashboards.text import TextView

    z = torch.tensor([[9.0, 1.0, 0.0, 2.0], [9.0, 0.0, 0.5, 0.0]])
    view = TextView(torch.tensor([65, 66]), z, Vocab(None), dense=torch.tensor([True, False, False, False]))
    assert view.features == [3, 1, 2, 0]  # by max among the others, the dense latent 0 after them
    assert "Dense features (1)" in view.fragment()
    assert TextView(torch.tensor([65, 66]), z, Vocab(None)).features[0] == 0  # no density given: by max
