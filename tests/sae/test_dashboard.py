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


HOOK = "blocks.0.hook_resid_post"


def _tiny_lm_store_and_sae(tmp_path, n_seq=24, ctx=16):
    """A tiny llama saved as a folder (the model spec), a store of its layer-0 residual rows on random bytes,
    and a ReLU SAE trained on them for a few steps."""
    import interp
    from tests.tiny import tiny_hf

    hook = HOOK
    tiny_hf("llama").save_pretrained(tmp_path / "m")
    model = interp.load_model(str(tmp_path / "m"))
    ids = torch.randint(0, 256, (n_seq, ctx), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(ids, names=[hook], return_logits=False)
    meta = StoreMeta(
        model=str(tmp_path / "m"),
        model_sha256="-",
        hooks={hook: [64]},
        dtype="float32",
        tokenizer="-",
        ctx_len=ctx,
        data={},
    )
    st = ActivationStore.open_or_create(tmp_path / "store", meta, n_shards_planned=1)
    rows = {
        hook: cache[hook].reshape(-1, 64).float(),
        "tokens": ids.flatten().int(),
        "seq": torch.arange(n_seq * ctx) // ctx,
        "pos": (torch.arange(n_seq * ctx) % ctx).int(),
    }
    st.commit_shard(write_shard_file(st.path, 0, rows))
    store, sae_dir = str(tmp_path / "store"), str(tmp_path / "sae")
    r = runner.invoke(
        app,
        ["train", "--store", store, "--arch", "relu", "--out", sae_dir, "--d-sae", "32"]
        + ["--max-tokens", "384", "--batch-size", "64"],
    )
    assert r.exit_code == 0, r.output
    return model, ids, cache[hook], rows[hook], store, sae_dir


def test_model_gives_the_hover_its_ablation_effects(tmp_path):
    """`sae dashboard --model SPEC` (a tiny llama saved in the test): each top window's hover numbers equal one
    forward per position with code * W_dec[latent] taken off the hook there; a zero decoder row gives 0."""
    from sae import load_sae

    model, ids, acts, _, store, sae_dir = _tiny_lm_store_and_sae(tmp_path)
    hook, ctx = HOOK, ids.shape[1]
    base = ["dashboard", "--sae", sae_dir, "--store", store, "--exclude", "none", "--top", "2", "--max-rows", "384"]
    r = runner.invoke(
        app, base + ["--out", str(tmp_path / "d"), "--model", str(tmp_path / "m"), "--ablate-windows", "3"]
    )
    assert r.exit_code == 0, r.output
    f = json.loads((tmp_path / "d" / "dashboard.json").read_text())["pages"][0]
    rec = json.loads((tmp_path / "d" / "features" / f"{f}.json").read_text())
    sae = load_sae(sae_dir)
    W = sae.W_dec[f].detach().float()
    ce = torch.nn.functional.cross_entropy
    checked = 0
    with torch.no_grad():
        for c in rec["top"][:3]:
            s = ids[c["seq"]]
            x = acts[c["seq"]].float()
            for k, dl in enumerate(c["ablation"]):
                p = c["pos"] - c["target"] + k
                if dl is None:
                    assert not (c["values"][k] or 0) > 0 or p + 1 == ctx
                    continue
                a = float(sae.encode(x[p : p + 1])[0, f])

                def ablate(t, h, p=p, a=a):
                    t = t.clone()
                    t[0, p] -= a * W
                    return t

                slow = ce(model.run_with_hooks(s[None], fwd_hooks=[(hook, ablate)])[0, p], s[p + 1])
                assert abs(dl - float(slow - ce(model(s[None])[0, p], s[p + 1]))) < 1e-5
                checked += 1
    assert checked >= 3 and all("ablation" not in c for c in rec["top"][3:])
    page = (tmp_path / "d" / "features" / f"{f}.html").read_text()
    assert "removing it here changes the next token" in page and "activation only" not in page
    r = runner.invoke(
        app, base + ["--out", str(tmp_path / "e"), "--model", str(tmp_path / "m"), "--ablate-windows", "-1"]
    )
    assert (
        r.exit_code == 2
        and "--ablate-windows must be >= 0" in r.output
        and not (tmp_path / "e" / "index.html").exists()
    )
    # a latent whose decoder row is zero changes nothing: every computed effect is 0
    from interp.dashboards import DashboardConfig, Vocab, collect
    from interp.dashboards.build import records
    from sae.dashboard import latent_ablation, sae_rows

    sr = sae_rows(sae_dir, store, 384, "none")
    with torch.no_grad():
        sr.sae.W_dec[f] = 0
    src = sr.source()
    cfg = DashboardConfig(features=[f])
    rec0 = records(collect(src, 32, cfg.stats, progress=False), src, Vocab(), [f], cfg)[f]
    latent_ablation(sr, model, "tiny", max_windows=3).annotate(rec0, src)
    got = [v for c in rec0["top"][:3] for v in c["ablation"] if v is not None]
    assert got and all(v == 0.0 for v in got)


def test_text_view_lists_dense_latents_last_on_the_real_path(tmp_path):
    """`sae dashboard --text` and `text_view` (which measures density on the store itself) put the latents that
    fire on > 10% of the store's rows after all the others."""
    import re

    from sae import load_sae
    from sae import metrics as M
    from sae.dashboard import sae_rows, text_view

    model, _, _, x_all, store, sae_dir = _tiny_lm_store_and_sae(tmp_path)
    sae = load_sae(sae_dir)
    base = ["dashboard", "--sae", sae_dir, "--store", store, "--exclude", "none", "--top", "2", "--max-rows", "384"]
    # without --model: activations only, and the page says so; the text view uses the store's model
    r = runner.invoke(app, base + ["--out", str(tmp_path / "d2"), "--text", "The cat sat on the mat, twice."])
    assert r.exit_code == 0, r.output
    f = json.loads((tmp_path / "d2" / "dashboard.json").read_text())["pages"][0]
    assert "activation only (built without a model" in (tmp_path / "d2" / "features" / f"{f}.html").read_text()
    view = (tmp_path / "d2" / "text.html").read_text()
    listed = [int(g) for g in re.findall(r'<tr><td>(?:<a href="[^"]*">)?(\d+)(?:</a>)?</td>', view)]
    dense = (M.encode(sae, x_all) > 0).float().mean(0) > 0.1  # the index's rule on the same 384 rows
    flags = [bool(dense[g]) for g in listed]
    assert listed and flags == sorted(flags) and ("Dense features (" in view) == any(flags)
    assert text_view(sae_dir, model, "The cat sat on the mat, twice.", exclude="none").features == listed
    # this barely trained SAE is dense everywhere: make half its latents fire on ~7% of rows, then both kinds show
    sr = sae_rows(sae_dir, store, 384, "none")
    with torch.no_grad():
        pre = x_all @ sr.sae.W_enc + sr.sae.b_enc
        sr.sae.b_enc[:16] -= pre[:, :16].quantile(0.93, dim=0).clamp_min(0)
    tv = text_view(sr, model, "The cat sat on the mat, twice. The dog ran off.")
    dense = (M.encode(sr.sae, x_all) > 0).float().mean(0) > 0.1
    flags = [bool(dense[g]) for g in tv.features]
    assert flags == sorted(flags) and any(flags) and not all(flags)  # the sparse latents first, then the dense
    assert "Dense features (" in tv.fragment()
