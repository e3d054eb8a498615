"""`interp contrib list` / `run`: one registry behind the CLI and the README index; every implemented
paper's --quick run works."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from interp.cli.main import app
from interp.contrib.registry import PAPERS, Paper, Status, get_paper, papers_with_status, render_index

README = Path(__file__).resolve().parents[3] / "interp" / "contrib" / "README.md"
runner = CliRunner()


def test_readme_index_is_rendered_from_the_registry():
    text = README.read_text()
    m = re.search(r"<!-- index:start[^\n]*-->\n(.*?)\n<!-- index:end -->", text, re.S)
    assert m, "the index markers are missing from interp/contrib/README.md"
    assert m.group(1) == render_index(), "README index is stale: paste `python -m interp.contrib.registry`"


def test_registry_is_complete_and_consistent():
    assert len(PAPERS) == 47 and len({p.name.lower() for p in PAPERS}) == 47
    root = README.parent
    for p in PAPERS:
        if p.implemented:
            assert (root / p.module).is_file(), p.module
            assert p.experiment and p.result, p.name
            rel = Path(*p.experiment.split(".")[2:]).with_suffix(".py")
            assert (root / rel).is_file(), p.experiment
            assert (root / p.cluster / "README.md").is_file(), p.cluster
        else:
            assert p.experiment is None
    assert get_paper("coupledpi").name == "CoupledPI"


def test_every_status_is_from_the_vocabulary_with_a_qualifier():
    for p in PAPERS:
        assert isinstance(p.status, Status) and p.status in set(Status), p.name
        assert isinstance(p.qualifier, str) and p.qualifier.strip(), p.name
    assert sum(len(papers_with_status(s)) for s in Status) == len(PAPERS)
    assert Status.parse(" Not Reproduced ") is Status.NOT_REPRODUCED
    with pytest.raises(ValueError, match="valid values: 'reproduced', 'partial'"):
        Status.parse("claim reproduced")
    with pytest.raises(TypeError):
        Paper("X", "geometry", "geometry/x.py", "reproduced", "toy", "r")
    with pytest.raises(ValueError, match="qualifier"):
        Paper("X", "geometry", "geometry/x.py", Status.PARTIAL, " ", "r")


def test_list_filters_by_status_and_shows_the_qualifier():
    res = runner.invoke(app, ["contrib", "list", "--status", "not reproduced"])
    assert res.exit_code == 0, res.output
    expected = papers_with_status(Status.NOT_REPRODUCED)
    assert expected and all(p.name in res.output and p.qualifier in res.output for p in expected)
    assert all(f"{p.name} " not in res.output for p in PAPERS if p.status is not Status.NOT_REPRODUCED)
    js = runner.invoke(app, ["contrib", "list", "--status", "partial", "--json"])
    assert js.exit_code == 0 and {d["status"] for d in json.loads(js.output)} == {"partial"}
    bad = runner.invoke(app, ["contrib", "list", "--status", "mostly"])
    assert bad.exit_code == 2
    assert (
        "error: unknown status 'mostly'; valid values: 'reproduced', 'partial', 'not reproduced', "
        "'metric only', 'not testable here'" in bad.output
    )


def test_list_prints_every_paper():
    res = runner.invoke(app, ["contrib", "list"])
    assert res.exit_code == 0, res.output
    for p in PAPERS:
        assert p.name in res.output
    assert f"of {len(PAPERS)} papers implemented" in res.output
    js = runner.invoke(app, ["contrib", "list", "--json"])
    assert js.exit_code == 0 and '"name": "SSMoE"' in js.output


def test_run_bad_names_fail_with_one_error_line():
    res = runner.invoke(app, ["contrib", "run", "NoSuchPaper"])
    assert res.exit_code == 2 and "error: unknown paper 'NoSuchPaper'" in res.output
    planned = [p.name for p in PAPERS if not p.implemented]
    if planned:  # every paper has a module since the fifth wave (issue 21)
        res = runner.invoke(app, ["contrib", "run", planned[0]])
        assert res.exit_code == 2 and "not implemented yet" in res.output


# Fourth wave (issue 20): --quick runs of a few seconds at most.
FAST_ISSUE20 = {"DP-SMK", "EF-NoisyQ", "OnlineFair", "FuseFSS", "OrchJail", "CREDIT", "FedFit", "MultiBreak"}
# Fifth wave (issue 21).
FAST_ISSUE21 = {"ParalESN", "SBC", "TRDI", "HIAL", "HMH", "BRep", "KUMA", "DiffInfo", "SWM"}

# The second wave's --quick runs take seconds; the first wave's experiments predate --quick sizes that
# small (tens of seconds to minutes each), so they run with the slow tests.
FAST = {
    "RDMReg",
    "InfoGlobe",
    "PACEAttention",
    "FourierSB",
    "MoE-NoiseFilter",
    "GEM",
    "SAFER",
    "L2M",
    "GFD-EMVC",
    "SourceScreen",
    "CoupledPI",
    "SelfTrain",
    "IPS-GRPO",
    "CFL",
    "EIG-ExpFam",
    "FI-Bagging",
    "MIPO",
    "SCPO",
    "StreamATE",
}
QUICK = [
    p.name if p.name in FAST | FAST_ISSUE20 | FAST_ISSUE21 else pytest.param(p.name, marks=pytest.mark.slow)
    for p in PAPERS
    if p.implemented
]


@pytest.mark.parametrize("name", QUICK)
def test_quick_run_of_every_implemented_paper(name, capsys):
    res = runner.invoke(app, ["contrib", "run", name, "--quick"])
    out = res.output + capsys.readouterr().out
    assert res.exit_code == 0, out[-2000:]
    assert "|" in out or "{" in out, "the run printed no result table"
