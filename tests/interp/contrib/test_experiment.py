"""The shared experiment command line: options in the scripts' order, their defaults and types, --quick, one thread."""

import subprocess
import sys

import pytest
import torch

from interp.contrib.experiment import THREADS_HELP, experiment_parser, parse


def flags(ap):
    return [a.option_strings[0] for a in ap._actions if a.option_strings and a.dest != "help"]


def test_options_defaults_and_order():
    ap = experiment_parser(
        "Title line.\n\nMore.",
        seeds=5,
        time_scale=(3.0, "weight of time"),
        n=50_000,
        quick="1 seed",
        no_lm="skip the SmolLM2 run",
    )
    assert ap.description == "Title line."
    assert flags(ap) == ["--seeds", "--time-scale", "--n", "--quick", "--no-lm"]
    a = ap.parse_args([])
    assert (a.seeds, a.time_scale, a.n, a.quick, a.no_lm) == (5, 3.0, 50_000, False, False)
    a = ap.parse_args(["--seeds", "2", "--time-scale", "1", "--quick", "--no-lm"])
    assert (a.seeds, a.time_scale, a.quick, a.no_lm) == (2, 1.0, True, True)
    assert isinstance(a.time_scale, float)
    text = ap.format_help()
    assert "weight of time" in text and "1 seed" in text and "skip the SmolLM2 run" in text


def test_without_seeds_with_flags_and_threads():
    ap = experiment_parser("T", seeds=None, model="smollm2-135m", no_smollm=False, threads=1, no_lm=True)
    assert flags(ap) == ["--model", "--no-smollm", "--threads", "--no-lm"]
    a = ap.parse_args(["--no-smollm", "--threads", "2"])
    assert (a.model, a.no_smollm, a.threads, a.no_lm) == ("smollm2-135m", True, 2, False)
    assert THREADS_HELP in ap.format_help()
    assert [x.help for x in ap._actions if x.dest == "no_lm"] == [None]
    with pytest.raises(SystemExit):
        ap.parse_args(["--quick"])  # no --quick unless asked for


def test_parse_sets_torch_threads():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        a = parse(experiment_parser("T", quick="q"), ["--quick"])
        assert a.quick and a.seeds == 3 and torch.get_num_threads() == 1
        parse(experiment_parser("T"), [], threads=2)
        assert torch.get_num_threads() == 2
        a = parse(experiment_parser("T", threads=1), ["--threads", "3"])
        assert a.threads == 3 and torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_importing_the_helper_does_not_import_torch():
    code = "import sys, interp.contrib.experiment; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_counts_and_seeds_refuse_values_below_one(capsys):
    ap = experiment_parser("doc", seeds=3, threads=1, agents=100, noise=0.5)
    for bad in (["--seeds", "0"], ["--agents", "-3"], ["--threads", "0"]):
        with pytest.raises(SystemExit) as e:
            ap.parse_args(bad)
        assert e.value.code == 2 and "expected a whole number >= 1" in capsys.readouterr().err
    assert ap.parse_args(["--noise", "-1"]).noise == -1.0  # floats keep their own range


def test_lm_samples_and_lm_only(capsys):
    from interp.contrib.experiment import LM_SAMPLES_HELP

    ap = experiment_parser("T", seeds=3, no_lm="skip", lm_samples=1, lm_only=True)
    assert flags(ap) == ["--seeds", "--no-lm", "--lm-samples", "--lm-only"]
    a = ap.parse_args([])
    assert (a.lm_samples, a.lm_only) == (1, False)
    assert [x.help for x in ap._actions if x.dest == "lm_samples"] == [LM_SAMPLES_HELP]
    a = ap.parse_args(["--lm-samples", "3", "--lm-only"])
    assert (a.lm_samples, a.lm_only) == (3, True)
    with pytest.raises(SystemExit):
        ap.parse_args(["--lm-samples", "0"])  # a count of samples is a whole number >= 1
    assert "--lm-samples" in capsys.readouterr().err
    assert "--lm-only" not in flags(experiment_parser("T", lm_samples=1))


def test_model_is_checked_before_anything_runs(capsys):
    ap = experiment_parser("T", seeds=None, model="smollm2-135m")
    assert ap.parse_args(["--model", "gemma3-270m"]).model == "gemma3-270m"
    with pytest.raises(SystemExit) as e:
        ap.parse_args(["--model", "nosuchmodel"])
    assert e.value.code == 2 and "error: argument --model: unknown model spec 'nosuchmodel'" in capsys.readouterr().err


def test_model_refusals_end_in_one_error_line(capsys):
    from interp.contrib.experiment import model_refusals
    from interp.contrib.lm_features import BosFirstError
    from interp.models.hub import NotCachedError

    for exc in (BosFirstError("gemma puts BOS first;\n use another model"), NotCachedError("not in the HF cache")):
        with pytest.raises(SystemExit) as e, model_refusals():
            raise exc
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1 and ": error: " in err
    with pytest.raises(KeyError), model_refusals():  # anything else is not a refusal: it propagates unchanged
        raise KeyError("bug")
