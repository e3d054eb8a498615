"""`interp --help` and `interp models` import no torch: checked on the import graph in a fresh interpreter."""

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "transformer_lens", "sae_lens", "nnsight", "sae", "circuits", "attribution")


def imported_after(code: str) -> list[str]:
    """Top-level packages from HEAVY that a fresh interpreter has imported after running `code`."""
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(%r))))" % (HEAVY,)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_cli(args: list[str]) -> str:
    return ("from interp.cli.main import app\n"
            f"try:\n    app({args!r}, prog_name='interp')\nexcept SystemExit as e:\n    assert not e.code, e.code\n")


def test_importing_the_cli_imports_no_torch():
    assert imported_after("import interp.cli.main") == []


def test_help_and_models_import_no_torch_and_no_family():
    assert imported_after(run_cli(["--help"])) == []
    assert imported_after(run_cli(["models"])) == []


def test_help_lists_family_commands_from_metadata():
    proc = subprocess.run([sys.executable, "-m", "interp", "--help"], capture_output=True, text=True, check=True)
    for name in ("models", "cache", "inspect", "probe", "dashboard", "sae", "circuits", "attribute"):
        assert f"\n  {name} " in proc.stdout, name
    assert "Train, evaluate and browse SAEs" in proc.stdout  # the sae module's docstring, read without importing it
    assert "<str>" not in proc.stdout and "<bool>" not in proc.stdout


def test_a_family_command_loads_when_asked_and_shows_metavars():
    proc = subprocess.run([sys.executable, "-m", "interp", "sae", "train", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "--d-sae INT" in proc.stdout and "<int>" not in proc.stdout and "<str>" not in proc.stdout


def test_a_typo_gets_a_suggestion_including_lazy_commands():
    proc = subprocess.run([sys.executable, "-m", "interp", "sea"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Did you mean 'sae'" in proc.stderr


def test_models_prints_headers_and_quantisation():
    proc = subprocess.run([sys.executable, "-m", "interp", "models"], capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["SPEC", "LOADS"] and "WEIGHTS" in lines[0]
    smol = next(line for line in lines if line.startswith("smollm2-135m "))
    assert "Q4_1" in smol and "dequantised" in smol
    assert any(line.startswith("pythia-70m-init ") and "random init" in line for line in lines)
    assert "dequantised weights" in proc.stdout


def test_a_broken_family_is_one_error_line_and_the_rest_still_works(monkeypatch):
    from typer.testing import CliRunner

    from interp.cli.main import app
    from interp.cli.plugins import LazyCommand, LazyGroup

    monkeypatch.setitem(LazyGroup.lazy, "broken", LazyCommand("broken", "no_such_family_module.cli:app"))
    runner = CliRunner()
    res = runner.invoke(app, ["broken", "--help"])
    assert res.exit_code == 2 and "could not load the command 'broken'" in res.stderr
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0 and "broken" in res.stdout and "models" in res.stdout
