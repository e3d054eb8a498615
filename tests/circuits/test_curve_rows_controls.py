"""The curve's rows, controls and MIB scores: evaluation rows never scoring rows, random controls nested across
sizes, CPR and CMD as MIB computes them (issue 37)."""

import json

import pytest
from typer.testing import CliRunner

from circuits.cli import app
from circuits.evaluation.curve import CurveConfig, curve_table, faithfulness_curve
from circuits.evaluation.faithfulness import nested_random_masks, random_connected_masks
from circuits.evaluation.mib import MIB_FRACTIONS, areas, curve_scores, mib_sizes
from circuits.evaluation.split import disjoint_split
from circuits.model.residual_graph import EdgeGraph
from circuits.tasks.binary import get_task
from tests.circuits.conftest import make_model


def _prompts(tmp_path, n: int, name: str = "pairs.jsonl", seed: int = 0):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in get_task("quotes").rows(n, seed)))
    return path


def _prompt(r):
    return r["clean"]


def test_a_prompts_file_is_split_into_disjoint_scoring_and_evaluation_rows(tmp_path):
    """The reported case: 20 rows, 10 scoring rows per seed and 10 evaluation rows drawn as two shuffles of one
    file shared 4-6 rows; now no seed's scoring rows meet the evaluation rows, and the file holds both."""
    path = _prompts(tmp_path, 20)
    split = disjoint_split(get_task(f"prompts:{path}"), n_score=10, n_eval=10)
    held = {_prompt(r) for r in split.eval_rows}
    assert len(held) == 10
    for seed in range(5):
        rows = split.task.rows(10, seed)
        assert len(rows) == 10 and not held & {_prompt(r) for r in rows}
        prompts, _, _ = split.task.generate(10, seed)  # the node finders' rows too
        assert not held & set(prompts)
    assert split.info["n_eval_rows"] == 10 and split.info["n_scoring_pool"] == 10
    assert "disjoint split" in split.info["split"]
    with pytest.raises(ValueError, match=r"has 20 rows: too few for 16 evaluation rows .* --eval-file"):
        disjoint_split(get_task(f"prompts:{path}"), n_score=16, n_eval=16)


def test_repeated_rows_and_eval_files_never_reach_the_scoring_side(tmp_path):
    rows = get_task("quotes").rows(6, 0)
    path = tmp_path / "dup.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + rows))  # every row twice
    split = disjoint_split(get_task(f"prompts:{path}"), n_score=3, n_eval=3)
    held = {_prompt(r) for r in split.eval_rows}
    assert not held & {_prompt(r) for r in split.task.rows(10, 0)}
    assert split.info["dropped_from_scoring"] > 0
    other = _prompts(tmp_path, 8, "eval.jsonl", seed=5)
    split = disjoint_split(get_task(f"prompts:{_prompts(tmp_path, 12)}"), n_score=4, n_eval=8, eval_file=str(other))
    assert {_prompt(r) for r in split.eval_rows} == {_prompt(json.loads(x)) for x in other.read_text().splitlines()}
    assert split.info["eval_file"] == str(other)
    # a generated task: evaluation seed 10,000, scoring seeds keep their own rows unless one is an evaluation row
    gen = disjoint_split(get_task("quotes"), n_score=8, n_eval=8)
    held = {_prompt(r) for r in gen.eval_rows}
    for seed in range(3):
        plain = get_task("quotes").rows(8, seed)
        rows = gen.task.rows(8, seed)
        assert len(rows) == 8 and not held & {_prompt(r) for r in rows}
        if not held & {_prompt(r) for r in plain}:
            assert rows == plain  # a seed that never met an evaluation row keeps the rows it always gave


def test_random_controls_are_nested_across_sizes():
    """One random order per draw, prefixes per size: the control at a smaller size is a subset of the one at a
    larger size (fresh draws per size were not: 3-6 edges of the smaller circuit missing from the larger)."""
    graph = EdgeGraph(n_layers=3, n_heads=4, n_kv=2, parallel=False)
    sizes = [5, 20, 60, 150]
    for connected in (False, True):
        masks = nested_random_masks(graph, sizes, seed=3, connected=connected)
        assert [int(m.sum()) for m in masks] == sizes
        for small, big in zip(masks, masks[1:]):
            assert not (small & ~big).any()
        assert not (masks[-1] & ~graph.valid).any()
    # the connected order is the one random_connected_masks cuts: same seed, same circuit at every size
    for n, m in zip(sizes, nested_random_masks(graph, sizes, seed=3, connected=True)):
        assert (m == random_connected_masks(graph, n, 1, seed=3)[0]).all()


def test_mib_areas_follow_their_trapezoid_rule():
    f = [0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1, 1.0, 1.0]
    cpr, cmd = areas(list(MIB_FRACTIONS), f)
    x = MIB_FRACTIONS
    want_cpr = sum((x[i + 1] - x[i]) * (f[i] + f[i + 1]) / 2 for i in range(9))
    want_cmd = sum((x[i + 1] - x[i]) * (abs(1 - f[i]) + abs(1 - f[i + 1])) / 2 for i in range(9))
    assert cpr == pytest.approx(want_cpr) and cmd == pytest.approx(want_cmd)
    assert areas([0.5, 1.0], [1.0, 1.0]) == pytest.approx((0.5, 0.0))  # a perfect curve: CMD 0
    assert mib_sizes(70651) == [70, 141, 353, 706, 1413, 3532, 7065, 14130, 35325, 70651]
    curve = {
        "unit": "edges",
        "n_edges_graph": 100,
        "n_heads_graph": 4,
        "points": [
            {"series": "eap", "size": 10, "faithfulness": 0.5, "per_seed": [0.4, 0.6]},
            {"series": "eap", "size": 50, "faithfulness": 1.0, "per_seed": [1.0, 1.0]},
        ],
    }
    s = curve_scores(curve)
    assert s["grid"] == "measured" and s["x_range"] == [0.1, 0.5]
    assert s["series"]["eap"]["cpr"] == pytest.approx(0.4 * 0.75)
    assert s["series"]["eap"]["cmd"] == pytest.approx(0.4 * 0.25)
    assert s["series"]["eap"]["per_seed"][0] == {"cpr": pytest.approx(0.28), "cmd": pytest.approx(0.12)}


def test_curve_reports_its_split_nested_control_draws_and_mib_scores(tmp_path):
    model = make_model("gpt_neox_seq")
    path = _prompts(tmp_path, 12)
    cfg = CurveConfig(method="eap", mib_grid=True, seeds=1, control_draws=3, n_prompts=4, n_eval=6, n_boot=20)
    curve = faithfulness_curve(model, get_task(f"prompts:{path}"), cfg)
    assert curve["split"]["n_eval_rows"] == 6 and "disjoint" in curve["split"]["split"]
    assert curve["controls"]["nested"] and curve["controls"]["draws"] == 3
    graph = EdgeGraph.of(model)
    for name in ("eap", "random", "random-connected"):
        pts = [p for p in curve["points"] if p["series"] == name]
        assert [p["size"] for p in pts] == mib_sizes(graph.n_edges)
        assert pts[-1]["faithfulness"] == pytest.approx(1.0, abs=1e-5)  # 100%: the whole graph
        if name != "eap":
            assert len(pts[0]["per_draw"]) == 3
    mib = curve["mib"]
    assert mib["grid"] == "mib" and set(mib["series"]) == {"eap", "random", "random-connected"}
    eap = [p["faithfulness"] for p in curve["points"] if p["series"] == "eap"]
    assert mib["series"]["eap"]["cpr"] == pytest.approx(areas(list(MIB_FRACTIONS), eap)[0])
    table = curve_table(curve)
    assert "CPR" in table and "on MIB's grid" in table and "6 evaluation rows" in table
    assert "subset of the one at a larger size" in table


def test_curve_cli_refuses_a_file_too_small_for_both_and_takes_an_eval_file(tmp_path):
    path = _prompts(tmp_path, 10)
    args = ["curve", "--quick", "--method", "eap", "--task", f"prompts:{path}", "--sizes", "10,30"]
    r = CliRunner().invoke(app, [*args, "--max-rows", "8", "--n-eval", "8", "--out", str(tmp_path / "a")])
    assert r.exit_code == 2 and "too few for 8 evaluation rows" in r.output and not (tmp_path / "a/curve.json").exists()
    other = _prompts(tmp_path, 6, "eval.jsonl", seed=9)
    r = CliRunner().invoke(app, [*args, "--eval-file", str(other), "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    curve = json.loads((tmp_path / "b/curve.json").read_text())
    assert curve["split"]["eval_file"] == str(other) and curve["split"]["n_eval_rows"] == 6
    assert "separate evaluation file" in r.output and "MIB's CPR" in r.output
