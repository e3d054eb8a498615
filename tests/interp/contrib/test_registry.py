"""The registry names, for every paper, the control behind its status and what its seeds are; the CLI shows both."""

import json
import re

from typer.testing import CliRunner

from interp.cli.main import app
from interp.contrib.registry import PAPERS, Status

runner = CliRunner()


def test_every_entry_names_its_control_and_its_seeds():
    for p in PAPERS:
        assert len(p.control.strip()) > 20, f"{p.name}: name the ablation and the baseline that isolate its ingredient"
        # it says what varies: model trainings (seeds), data splits or draws, runs of an estimator, instances
        assert re.search(r"seed|split|draw|run|training|instance|agent|task", p.seeds), f"{p.name}: {p.seeds!r}"
        # a verdict of "reproduced" needs seed noise: one training is not enough
        if p.status is Status.REPRODUCED:
            assert "one training" not in p.seeds and "one DDPM training" not in p.seeds, p.name


def test_list_controls_flag_and_json_show_them():
    res = runner.invoke(app, ["contrib", "list", "--controls"])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    for p in PAPERS:
        assert f"control: {p.control}" in flat and f"seeds: {p.seeds}" in flat, p.name
    plain = runner.invoke(app, ["contrib", "list"])
    assert "control: " not in plain.output
    js = json.loads(runner.invoke(app, ["contrib", "list", "--json"]).output)
    assert {d["name"]: (d["control"], d["seeds"]) for d in js} == {p.name: (p.control, p.seeds) for p in PAPERS}
