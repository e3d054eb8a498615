"""Every command speaks the one option vocabulary (interp/cli/options.py); old spellings are hidden aliases."""

import pytest
import typer

from interp.cli.main import app

OLD_SPELLINGS = {"--force", "--tokens", "--no-no-resume", "--checkpoint", "--ce-seqs", "--max-train",
                 "--max-queries", "--n-prompts", "--n"}
"""Spellings replaced by the vocabulary; they may survive one version as hidden options only."""

CONCEPTS = {
    "top-N": {"--top"},
    "hook names": {"--hooks"},
    "output file": {"--out-file"},
    "start a resumable run over": {"--restart"},
    "tokens per step": {"--batch-tokens"},
}
SECOND_SPELLINGS = {
    "top-N": {"--top-n", "--top-k", "--topk", "--n-top", "--k-top"},
    "hook names": {"--hook", "--hook-name", "--hook-names"},
    "output file": {"--output", "--out-path", "--output-file", "--file"},
    "start a resumable run over": {"--start-over", "--fresh", "--force", "--reset"},
    "tokens per step": {"--tokens-per-batch", "--batch-size-tokens"},
}
"""One spelling per concept (README's table): any other spelling of it may only be a hidden alias."""

COMPUTES = {"cache", "probe", "demo", "sae train", "sae eval", "circuits baseline", "circuits extract",
            "circuits ablate", "circuits curve", "attribute run"}
"""Commands that run a model or train: each takes --device, --seed and --threads."""


def commands():
    """(path, click command) of every command and group (a group's own options count too), families included."""
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path):
        if path:
            out.append((" ".join(path), cmd))
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(None):
                walk(cmd.get_command(None, name), [*path, name])

    walk(root, [])
    return out


ALL = commands()


def visible_options(cmd):
    return [p for p in cmd.params if getattr(p, "param_type_name", "") == "option" and not getattr(p, "hidden", False)]


@pytest.mark.parametrize("path, cmd", ALL, ids=[p for p, _ in ALL])
def test_options_follow_the_vocabulary(path, cmd):
    for p in visible_options(cmd):
        names = set(p.opts) | set(p.secondary_opts)
        assert not names & OLD_SPELLINGS, f"interp {path}: {sorted(names & OLD_SPELLINGS)} should be a hidden alias"
        if not getattr(p, "is_flag", False) and p.metavar is not None:
            assert not p.metavar.startswith("<"), f"interp {path} {p.opts}: metavar {p.metavar}"
        if "--device" in names:
            assert p.default == "auto", f"interp {path}: --device defaults to {p.default!r}, not auto"
        if "--resume" in names:
            assert "--no-resume" in p.secondary_opts, f"interp {path}: --resume/--no-resume is one flag"
        if "--overwrite" in names:
            assert p.is_flag and p.default is False


def test_every_command_is_reached():
    paths = {p for p, _ in ALL}
    assert {"models", "cache", "inspect", "probe", "sae train", "circuits extract", "attribute run",
            "attribute show"} <= paths


def names_of(cmd):
    return {n for p in visible_options(cmd) for n in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("path, cmd", ALL, ids=[p for p, _ in ALL])
def test_one_spelling_per_concept(path, cmd):
    names = names_of(cmd)
    for concept, others in SECOND_SPELLINGS.items():
        assert not names & others, f"interp {path}: {sorted(names & others)} spell {concept!r}; use {CONCEPTS[concept]}"
    for p in visible_options(cmd):
        if "--out" in p.opts:
            assert p.metavar == "DIR", f"interp {path}: --out is a folder (metavar DIR), got {p.metavar}"
        if "--batch-size" in p.opts:
            assert "token" not in (p.help or "").lower().split(".")[0], f"interp {path}: --batch-size counts sequences"
    positional = [p for p in cmd.params if getattr(p, "param_type_name", "") == "argument" and not p.hidden]
    for p in positional:
        assert p.name not in ("store", "circuit", "file", "run"), f"interp {path}: {p.name} is an option, not positional"


@pytest.mark.parametrize("path", sorted(COMPUTES))
def test_commands_that_compute_take_device_seed_threads(path):
    cmd = dict(ALL)[path]
    missing = {"--device", "--seed", "--threads"} - names_of(cmd)
    assert not missing, f"interp {path} lacks {sorted(missing)}"


def test_a_deprecated_spelling_warns_and_still_works(capsys):
    from interp.cli import options as O
    from interp.cli.errors import CliError

    assert O.deprecated(None, "--tokens", "--max-tokens", 100, 100) == 100  # not given: the new value, silently
    assert capsys.readouterr().err == ""
    assert O.deprecated(500, "--tokens", "--max-tokens", 100, 100) == 500
    assert "--tokens is deprecated" in capsys.readouterr().err and True
    assert O.deprecated(True, "--force", "--overwrite", False, False) is True
    with pytest.raises(CliError, match="use only --max-tokens"):
        O.deprecated(500, "--tokens", "--max-tokens", 300, 100)
