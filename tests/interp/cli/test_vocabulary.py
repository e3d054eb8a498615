"""Every command speaks the one option vocabulary (interp/cli/options.py); old spellings are hidden aliases."""

import pytest
import typer

from interp.cli.main import app

OLD_SPELLINGS = {
    "--force",
    "--tokens",
    "--no-no-resume",
    "--checkpoint",
    "--ce-seqs",
    "--max-train",
    "--max-queries",
    "--n-prompts",
    "--n",
}
"""Spellings replaced by the vocabulary; they may survive one version as hidden options only."""


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
    assert {"models", "cache", "inspect", "probe", "sae train", "circuits extract", "attribute"} <= paths


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
