"""`interp attribute show` on a run written in the test; DRA's flags; LESS-style Adam normalisation."""

import json

import pytest
import torch
from typer.testing import CliRunner

from attribution.adam import AdamState, adam_gradient_representations, adam_normalise
from attribution.cli import app
from attribution.dra import DenoiseConfig, dra_scores
from attribution.jobs import AttributeConfig, load_scores, run_attribution, save_tokens
from attribution.looped import random_looped_gpt
from attribution.train import train_lm

BYTE = "interp/byte-level"


def _bytes(text: str, n: int) -> list[int]:
    ids = list(text.encode())
    return (ids * (n // len(ids) + 1))[:n]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("show")
    model = random_looped_gpt(hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64,
                              max_position_embeddings=32)
    texts = ["<script>alert(1)</script> ", "the cat sat on the mat. ", "def f(x): return x + 1 ",
             "1 2 3 4 5 6 7 8 9 10 ", "SELECT * FROM t; ", "& &amp; \"quoted\" ", "zzzz yyyy xxxx ", "hello hello "]
    pool = torch.tensor([_bytes(t, 24) for t in texts])
    train_lm(model, pool, steps=4, batch_size=4, lr=1e-3, save_steps=(2, 4), out=root / "run")
    save_tokens(root / "train.safetensors", pool, BYTE)
    save_tokens(root / "queries.safetensors", pool[[1, 0]], BYTE)
    runner = CliRunner()
    res = runner.invoke(app, ["run", "--method", "sdi", "--model", f"looped-gpt:{root / 'run'}", "--train",
                              f"tokens:{root / 'train.safetensors'}", "--queries", f"tokens:{root / 'queries.safetensors'}",
                              "--out", str(root / "sdi"), "--sketch-dim", "0", "--device", "cpu", "--shard-size", "4"])
    assert res.exit_code == 0, res.output
    return root


def test_show_prints_top_and_bottom_examples_as_text_with_scores(run):
    res = CliRunner().invoke(app, ["show", str(run / "sdi"), "--top", "2"])
    assert res.exit_code == 0, res.output
    scores = load_scores(run / "sdi")["scores"]
    out = res.stdout
    assert "query 0: the cat sat on the mat." in out and "query 1: <script>" in out
    # Query 0 is training row 1: exact TracIn self-influence (a squared gradient norm) ranks it first.
    best = int(scores[:, 0].argmax())
    assert best == 1
    lines = out.splitlines()
    top_line = lines[lines.index("  top (most helpful)") + 1]
    assert "#1 " in top_line and "the cat sat" in top_line and f"{float(scores[1, 0]):+11.4g}".strip() in top_line
    worst = int(scores[:, 0].argmin())
    assert any(f"#{worst} " in line for line in lines[lines.index("  bottom (most harmful)"):])
    result = json.loads((run / "sdi" / "result.json").read_text())
    assert result["identity"]["model"]["spec"].startswith("looped-gpt:")
    assert len(result["identity"]["data"]["train_tokens_sha256"]) == 64
    assert [c["lr"] for c in result["identity"]["checkpoints"]] == [1e-3, 1e-3]


def test_show_writes_escaped_html_with_rankings_histogram_and_sdi_heatmap(run):
    res = CliRunner().invoke(app, ["show", str(run / "sdi"), "--out", str(run / "html")])
    assert res.exit_code == 0, res.output
    page = (run / "html" / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script" in page
    assert "&amp;amp;" in page  # "&amp;" in the data is shown literally
    assert page.count("<h2>query") == 2 and page.count("<svg") == 2
    assert "step 1</th><th>step 2</th>" in page  # SDI heat map over the 2 loop steps


def test_show_on_a_folder_without_a_run_fails_cleanly(tmp_path):
    res = CliRunner().invoke(app, ["show", str(tmp_path)])
    assert res.exit_code == 2 and "not a finished attribution run" in res.output
    assert not (tmp_path / "report.html").exists()


def test_dra_flags_reach_the_denoising(run):
    base = ["--method", "dra", "--model", f"looped-gpt:{run / 'run'}", "--train", f"tokens:{run / 'train.safetensors'}",
            "--queries", f"tokens:{run / 'queries.safetensors'}", "--device", "cpu", "--select-dims", "all"]
    runner = CliRunner()
    got = {}
    for name, flags in {"default": [], "whiten": ["--whiten"], "raw": ["--no-center"]}.items():
        res = runner.invoke(app, ["run", *base, "--out", str(run / f"dra_{name}"), *flags])
        assert res.exit_code == 0, res.output
        got[name] = load_scores(run / f"dra_{name}")["scores"][:, 0]
    assert not torch.allclose(got["default"], got["whiten"]) and not torch.allclose(got["default"], got["raw"])
    res = runner.invoke(app, ["run", *base, "--out", str(run / "bad"), "--neutral-removal", "0.5", "--representation", "gradient"])
    assert res.exit_code == 2 and "--representation hidden" in res.output and not (run / "bad").exists()


def test_default_dra_is_centering_without_whitening():
    cfg = AttributeConfig(method="dra", model="m", train="t", queries="q", out="o", device="cpu")
    assert cfg.center and not cfg.whiten
    x, t = torch.randn(50, 8), torch.randn(3, 8)
    a = dra_scores(x, t, DenoiseConfig(center=cfg.center, whiten=cfg.whiten, select_dims=None)).scores
    b = dra_scores(x - x.mean(0), t - x.mean(0), DenoiseConfig(center=False, whiten=False, select_dims=None)).scores
    torch.testing.assert_close(a, b)


def test_adam_normalised_gradients_match_the_formula_on_saved_moments(tmp_path):
    import interp

    model = random_looped_gpt(hidden_size=16, num_attention_heads=2, num_hidden_layers=2, intermediate_size=32,
                              max_position_embeddings=16)
    pool = torch.randint(0, 257, (8, 12), generator=torch.Generator().manual_seed(0))
    train_lm(model, pool, steps=3, batch_size=4, lr=1e-2, save_steps=(3,), out=tmp_path)
    state = AdamState.load(tmp_path / "step_3")
    name = "lm_head"
    hooked = interp.HookedModel(model, None)
    ids = pool[:2]
    got = adam_gradient_representations(hooked, ids, torch.ones_like(ids), [name], state, sketch_dim=None)
    from attribution.capture import per_example_lm_loss

    for b in range(2):
        g = torch.autograd.grad(per_example_lm_loss(model, ids[b:b + 1], torch.ones_like(ids[b:b + 1])).sum(),
                                [model.lm_head.weight])[0].flatten()
        want = adam_normalise(g[None], state.exp_avg[f"{name}.weight"].flatten(), state.exp_avg_sq[f"{name}.weight"].flatten(),
                              state.betas, state.eps)[0]
        torch.testing.assert_close(got[b][:want.numel()], want, rtol=1e-4, atol=1e-6)
    with pytest.raises(FileNotFoundError, match="adam_state"):
        AdamState.load(tmp_path)
