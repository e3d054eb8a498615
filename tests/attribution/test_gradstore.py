"""The gradient store (`interp attribute build` / `query`): same top-k as the direct path, resumable, refusals."""

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from attribution.cli import app
from attribution.gradstore import (
    BuildConfig,
    BuildTask,
    Projection,
    QueryConfig,
    _projector,
    build_store,
    exact_topk,
)
from attribution.jobs import save_tokens
from attribution.looped import random_looped_gpt
from attribution.resident import query_store
from attribution.train import train_lm

BYTE = "interp/byte-level"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny looped GPT trained for 6 steps (checkpoints at 3 and 6, with Adam state) and token files."""
    root = tmp_path_factory.mktemp("gradstore")
    model = random_looped_gpt(
        hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64, max_position_embeddings=16
    )
    g = torch.Generator().manual_seed(0)
    pool = torch.randint(0, 257, (40, 16), generator=g)
    train_lm(model, pool, steps=6, batch_size=8, lr=1e-3, save_steps=(3, 6), out=root / "run")
    save_tokens(root / "train.safetensors", pool[:22], BYTE)
    save_tokens(root / "queries.safetensors", pool[30:34], BYTE)
    return root


def _model(run, step=6):
    return f"looped-gpt:{run / 'run'}@{step}"


def _build(run, out, **kw):
    cfg = dict(
        model=_model(run),
        train=f"tokens:{run / 'train.safetensors'}",
        out=str(run / out),
        shard_size=5,
        batch_size=4,
        dim=64,
        device="cpu",
    )
    return build_store(BuildConfig(**{**cfg, **kw}), progress=False)


def _query(run, store, **kw):
    return query_store(
        QueryConfig(store=str(run / store), queries=f"tokens:{run / 'queries.safetensors'}", top=5, device="cpu", **kw)
    )


@pytest.mark.parametrize("projection", ["random", "sketch"])
def test_store_gives_the_top_k_of_the_direct_computation_at_the_same_projection(run, projection):
    summary = _build(run, f"store_{projection}", projection=projection)
    assert summary["shards"] == 5 and summary["n_train"] == 22
    res = _query(run, f"store_{projection}")
    train = __import__("safetensors.torch").torch.load_file(str(run / "train.safetensors"))["tokens"]
    queries = __import__("safetensors.torch").torch.load_file(str(run / "queries.safetensors"))["tokens"]
    vals, idx = exact_topk(_model(run), train, queries, [], Projection(projection, 64, 0), 5)
    assert torch.equal(res["rows"], idx)
    torch.testing.assert_close(res["scores"], vals, rtol=1e-4, atol=1e-5 * vals.abs().max().item())


def test_sketch_rows_equal_the_explicit_sketch_of_exact_gradients(run):
    """The store's TensorSketch rows (never forming a gradient) and the query side's explicit projection of the
    exact gradient are the same linear map: otherwise store and query would not be comparable."""
    model, proj = _projector(_model(run), "cpu", [], Projection("sketch", 32, 3))
    ids = torch.randint(0, 257, (3, 16), generator=torch.Generator().manual_seed(1))
    rows = proj.train_rows(model.hf_model, ids, 3)
    ref = proj.project(proj.exact_gradients(model.hf_model, ids))
    torch.testing.assert_close(rows, ref, rtol=1e-4, atol=1e-5 * ref.abs().max().item())


def test_random_projection_preserves_inner_products(run):
    model, proj = _projector(_model(run), "cpu", [], Projection("random", 2048, 0))
    ids = torch.randint(0, 257, (6, 16), generator=torch.Generator().manual_seed(2))
    g = proj.exact_gradients(model.hf_model, ids)
    p = proj.project(g)
    exact, est = g @ g.T, p @ p.T
    assert ((est - exact).abs().max() / exact.abs().max()) < 0.15


def test_preconditioners_run_and_heavy_damping_gives_the_plain_ranking(run):
    _build(run, "store_pre")
    plain = _query(run, "store_pre")["rows"]
    damped = _query(run, "store_pre", precondition="diag", damping=1e8)["rows"]  # ~ a scalar: the same ranking
    assert torch.equal(plain, damped)
    adam = _query(run, "store_pre", precondition="adam", adam_state=str(run / "run" / "step_6"))
    diag = _query(run, "store_pre", precondition="diag", damping=0.1)
    assert torch.isfinite(adam["scores"]).all() and torch.isfinite(diag["scores"]).all()
    assert not torch.equal(adam["rows"], plain) or not torch.equal(diag["rows"], plain)


def test_faiss_search_gives_the_same_top_k(run):
    pytest.importorskip("faiss")
    _build(run, "store_pre")
    a, b = _query(run, "store_pre"), _query(run, "store_pre", faiss=True)
    assert torch.equal(a["rows"], b["rows"])


def test_a_pickled_build_task_carries_only_its_own_rows():
    sizes = []
    for n in (1_000, 20_000):
        train = torch.zeros(n, 64, dtype=torch.long)
        task = BuildTask(3, 24, train[24:32], "m", "cpu", (), Projection("random", 8, 0), 4, "/x")
        sizes.append(len(pickle.dumps(task)))
    assert sizes[0] == sizes[1] < 10_000


KILLED = textwrap.dedent("""
    import sys, time
    import attribution.gradstore as gs
    real = gs.build_shard
    def slow(task):
        out = real(task)
        time.sleep(0.4)
        return out
    gs.build_shard = slow
    gs.build_store(gs.BuildConfig(model=sys.argv[1], train=sys.argv[2], out=sys.argv[3], shard_size=2, batch_size=2,
                                  dim=64, device="cpu"), progress=False)
""")


def test_a_build_killed_with_sigkill_resumes_with_nothing_lost_or_duplicated(run):
    out = run / "killed"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]), OMP_NUM_THREADS="1")
    args = [_model(run), f"tokens:{run / 'train.safetensors'}", str(out)]
    proc = subprocess.Popen([sys.executable, "-c", KILLED, *args], env=env)
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        man = out / "manifest.json"
        if man.exists() and json.loads(man.read_text())["n_shards"] >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    committed = json.loads((out / "manifest.json").read_text())["n_shards"]
    assert 3 <= committed < 11, committed
    (out / "shard_00010.safetensors").write_bytes(b"half written")  # a stray, uncommitted file
    summary = build_store(
        BuildConfig(
            model=_model(run),
            train=f"tokens:{run / 'train.safetensors'}",
            out=str(out),
            shard_size=2,
            batch_size=2,
            dim=64,
            device="cpu",
        ),
        progress=False,
    )
    assert summary["shards_computed_now"] == 11 - committed
    ref = _build(run, "unkilled", shard_size=2, batch_size=2)
    assert ref["shards_computed_now"] == 11
    from interp.store import ActivationStore

    a, b = ActivationStore.open(out), ActivationStore.open(run / "unkilled")
    assert a.verify().ok and len(a) == 22
    ra = torch.cat([a.read_shard(i)["grad"] for i in a.shard_indices])
    rb = torch.cat([b.read_shard(i)["grad"] for i in b.shard_indices])
    assert torch.equal(torch.cat([a.read_shard(i)["seq"] for i in a.shard_indices]), torch.arange(22))
    torch.testing.assert_close(ra, rb)


def _cli(*args):
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.output


def _lines(text):
    return [x for x in text.strip().splitlines() if x.strip()]


def test_bad_input_is_one_error_line_and_nothing_written(run):
    _build(run, "store_bad")
    q = [
        "query",
        "--store",
        str(run / "store_bad"),
        "--queries",
        f"tokens:{run / 'queries.safetensors'}",
        "--device",
        "cpu",
    ]
    cases = {
        "another model": [*q, "--model", _model(run, 3), "--out", str(run / "q1")],
        "another parameter set": [*q, "--modules", "transformer.block.q_proj", "--out", str(run / "q2")],
        "projection mismatch": [*q, "--dim", "99", "--out", str(run / "q3")],
    }
    for what, args in cases.items():
        code, output = _cli(*args)
        assert code == 2 and len(_lines(output)) == 1 and output.startswith("error:"), (what, output)
        assert what.split()[-1] in output or "mismatch" in output, (what, output)
        assert not Path(args[-1]).exists()
    # a build into the store with other settings is refused and changes nothing
    before = (run / "store_bad" / "manifest.json").read_bytes()
    code, output = _cli(
        "build",
        "--model",
        _model(run),
        "--train",
        f"tokens:{run / 'train.safetensors'}",
        "--out",
        str(run / "store_bad"),
        "--dim",
        "32",
        "--shard-size",
        "5",
        "--device",
        "cpu",
    )
    assert code == 2 and len(_lines(output)) == 1 and "other settings" in output, output
    assert (run / "store_bad" / "manifest.json").read_bytes() == before
    # a damaged shard is named
    shard = run / "store_bad" / "shard_00002.safetensors"
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF
    shard.write_bytes(bytes(data))
    code, output = _cli(*q, "--out", str(run / "q4"))
    assert code == 2 and len(_lines(output)) == 1 and "shard_00002.safetensors" in output, output
    assert not (run / "q4").exists()


def test_cli_build_then_query(run):
    out = run / "cli_store"
    code, output = _cli(
        "build",
        "--model",
        _model(run),
        "--train",
        f"tokens:{run / 'train.safetensors'}",
        "--out",
        str(out),
        "--projection",
        "sketch",
        "--dim",
        "32",
        "--shard-size",
        "8",
        "--device",
        "cpu",
    )
    assert code == 0, output
    code, output = _cli(
        "query",
        "--store",
        str(out),
        "--queries",
        f"tokens:{run / 'queries.safetensors'}",
        "--top",
        "3",
        "--out",
        str(run / "cli_q"),
        "--device",
        "cpu",
    )
    assert code == 0, output
    res = json.loads((run / "cli_q" / "topk.json").read_text())
    assert len(res["topk"]) == 4 and all(len(t) == 3 for t in res["topk"])
    # several query sets in one process: one folder each, each equal to its own call's answer
    q = f"tokens:{run / 'queries.safetensors'}"
    args = ("query", "--store", str(out), "--queries", q, "--queries", q, "--top", "3", "--device", "cpu")
    code, output = _cli(*args, "--out", str(run / "cli_many"))
    assert code == 0, output
    many = json.loads(output[output.index("[") :])

    def rows_scores(topk):
        return [[t["row"] for t in q] for q in topk], torch.tensor([[t["score"] for t in q] for q in topk])

    want_rows, want_scores = rows_scores(res["topk"])
    assert len(many) == 2
    for got in [m["topk"] for m in many] + [
        json.loads((run / "cli_many" / "query_1" / "topk.json").read_text())["topk"]
    ]:
        rows, scores = rows_scores(got)  # held in memory: one matmul, the same rows, scores to float rounding
        assert rows == want_rows
        torch.testing.assert_close(scores, want_scores)


def test_resident_index_answers_as_the_streamed_search(run):
    from attribution.gradstore import QueryConfig
    from attribution.resident import GradientIndex, query_store

    store = run / "cli_store" if (run / "cli_store").exists() else None
    if store is None:
        pytest.skip("needs the store test_cli_build_then_query builds")
    q = f"tokens:{run / 'queries.safetensors'}"
    index = GradientIndex(str(store), top=3, device="cpu")
    streamed = GradientIndex(str(store), top=3, device="cpu", max_resident_bytes=0)
    assert index.rows is not None and streamed.rows is None
    a, b = index.query(q), streamed.query(q)
    assert a["search"] == "resident" and b["search"] == "streamed"
    torch.testing.assert_close(a["scores"], b["scores"])
    assert torch.equal(a["rows"], b["rows"])
    assert torch.equal(query_store(QueryConfig(store=str(store), queries=q, top=3, device="cpu"))["rows"], a["rows"])
    with pytest.raises(ValueError, match="--top must be positive"):
        index.query(q, top=0)


class _FailingRay:
    """A stand-in `ray` module whose start fails (as a raylet that never comes up does)."""

    @staticmethod
    def is_initialized():
        return False

    @staticmethod
    def init(**kw):
        Path(kw["_temp_dir"], "session_2099-01-01").mkdir()  # Ray had begun writing its session folder
        raise RuntimeError("Failed to start the raylet: timed out after 30 s\nmore detail")

    @staticmethod
    def shutdown():
        pass


def test_a_ray_start_failure_is_one_error_line_with_no_session_folder_left(run, monkeypatch):
    import tempfile

    import attribution.raywatch as rw

    made = []
    real = tempfile.mkdtemp

    def recording(*a, **kw):
        made.append(real(*a, **kw))
        return made[-1]

    monkeypatch.setitem(sys.modules, "ray", _FailingRay)
    monkeypatch.setattr(rw.tempfile, "mkdtemp", recording)
    code, output = _cli(
        "build",
        "--model",
        _model(run),
        "--train",
        f"tokens:{run / 'train.safetensors'}",
        "--out",
        str(run / "ray_store"),
        "--executor",
        "ray",
        "--device",
        "cpu",
    )
    assert code == 2 and len(_lines(output)) == 1 and "could not start a local Ray" in output, output
    assert made and not any(Path(p).exists() for p in made)
    assert not (run / "ray_store").exists()
    from attribution.cli import app as attribute_app

    r = CliRunner().invoke(
        attribute_app,
        [
            "run",
            "--method",
            "tracin",
            "--model",
            f"looped-gpt:{run / 'run'}",
            "--train",
            f"tokens:{run / 'train.safetensors'}",
            "--queries",
            f"tokens:{run / 'queries.safetensors'}",
            "--out",
            str(run / "ray_job"),
            "--sketch-dim",
            "32",
            "--executor",
            "ray",
            "--device",
            "cpu",
        ],
    )
    assert r.exit_code == 2 and len(_lines(r.output)) == 1 and "could not start a local Ray" in r.output, r.output
    assert not any(Path(p).exists() for p in made) and not (run / "ray_job").exists()


def test_a_measurement_query_ranks_rows_by_what_a_step_on_them_does_to_it(run):
    """The SAE-latent / direction queries: the top-ranked training row's gradient step raises the measurement, the
    bottom-ranked one's lowers it (first order, a small step, the exact loss)."""
    import copy

    from attribution.capture import per_example_lm_loss
    from attribution.measurements import direction
    from attribution.resident import GradientIndex

    _build(run, "store_measure", projection="random", dim=256)
    index = GradientIndex(str(run / "store_measure"), top=22, device="cpu")
    hook = index.model.hook_names()[len(index.model.hook_names()) // 2]
    v = torch.randn(index.model.d_model, generator=torch.Generator().manual_seed(5))
    prompts = __import__("safetensors.torch").torch.load_file(str(run / "queries.safetensors"))["tokens"][:1]
    measure = direction(index.model, hook, v)
    ranked = index.query_measurement(measure, prompts)["rows"][0]
    train = __import__("safetensors.torch").torch.load_file(str(run / "train.safetensors"))["tokens"]

    def change_after_step_on(row: int) -> float:
        hf = index.model.hf_model
        saved = copy.deepcopy(hf.state_dict())
        try:
            with torch.no_grad():
                before = float(measure(hf, prompts, torch.ones_like(prompts)).sum())
            loss = per_example_lm_loss(hf, train[row : row + 1], torch.ones_like(train[row : row + 1])).sum()
            grads = torch.autograd.grad(loss, [p for p in hf.parameters() if p.requires_grad], allow_unused=True)
            with torch.no_grad():
                for p, g in zip([p for p in hf.parameters() if p.requires_grad], grads):
                    if g is not None:
                        p -= 1e-4 * g
                return float(measure(hf, prompts, torch.ones_like(prompts)).sum()) - before
        finally:
            hf.load_state_dict(saved)

    assert change_after_step_on(int(ranked[0])) > 0 > change_after_step_on(int(ranked[-1]))
