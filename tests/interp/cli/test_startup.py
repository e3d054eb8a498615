"""`interp --help` and `interp models` import no torch: checked on the import graph in a fresh interpreter."""

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "transformer_lens", "sae_lens", "nnsight", "sae", "circuits", "attribution")


def imported_after(code: str) -> list[str]:
    """Top-level packages from HEAVY that a fresh interpreter has imported after running `code`."""
    heavy = repr(HEAVY)
    probe = (
        code
        + "\nimport sys, json\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set("
        + heavy
        + "))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_cli(args: list[str]) -> str:
    return (
        "from interp.cli.main import app\n"
        f"try:\n    app({args!r}, prog_name='interp')\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
    )


def test_importing_the_cli_imports_no_torch():
    assert imported_after("import interp.cli.main") == []


def test_help_and_models_import_no_torch_and_no_family():
    assert imported_after(run_cli(["--help"])) == []
    assert imported_after(run_cli(["models"])) == []


LIBRARIES = ("torch", "transformers", "transformer_lens", "sae_lens", "nnsight", "pydantic")
FAMILY_HELP = (
    ["sae"],
    ["circuits"],
    ["attribute"],
    ["sae", "train"],
    ["sae", "eval"],
    ["circuits", "extract"],
    ["circuits", "show"],
    ["attribute", "show"],
)


def test_family_help_imports_no_torch_and_leaves_the_family_unimported():
    """`interp sae --help` loads `sae/cli.py` without running `sae/__init__` (torch, sae-lens), nor pydantic."""
    for args in FAMILY_HELP:
        probe = run_cli([*args, "--help"]) + (
            "import sys, json\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set("
            + repr(LIBRARIES)
            + "))))"
        )
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert "Usage:" in proc.stdout, args
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == [], args


def test_help_leaves_the_family_package_as_a_normal_import_would(monkeypatch):
    """After a help-only line the family package is imported afresh by the next `import` (its __init__ runs)."""
    code = run_cli(["sae", "--help"]) + (
        "import sys\nassert 'sae' not in sys.modules and 'sae.cli' not in sys.modules, sorted(sys.modules)\n"
        "from interp.cli.plugins import import_deferred, finish_deferred\n"
        "cli = import_deferred('circuits.cli')\nassert 'torch' not in sys.modules\n"
        "import circuits\nfrom circuits import Circuit\nassert 'torch' in sys.modules and circuits.cli is cli\n"
        "print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


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


def test_help_reads_entry_points_without_importlib_metadata():
    probe = (
        run_cli(["--help"])
        + "import sys\nprint(sorted(m for m in sys.modules if m.startswith(('email', 'importlib.metadata'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_entry_points_read_from_files_equal_importlib_metadata():
    from importlib.metadata import entry_points as official

    from interp.cli.entry_points import entry_points

    for group in ("interp.commands", "interp.demo", "interp.models", "console_scripts"):
        assert sorted(entry_points(group)) == sorted({(e.name, e.value) for e in official(group=group)}), group


def test_entry_points_first_distribution_on_the_path_wins(tmp_path):
    from interp.cli.entry_points import entry_points, parse

    for folder, target in (("a", "new.cli:app"), ("b", "old.cli:app")):
        meta = tmp_path / folder / "My_Tool-0.1.dist-info"
        meta.mkdir(parents=True)
        (meta / "entry_points.txt").write_text(f"# comment\n[other]\nx = y:z\n\n[interp.commands]\ntool = {target}\n")
    assert entry_points("interp.commands", [str(tmp_path / "a"), str(tmp_path / "b")]) == [("tool", "new.cli:app")]
    assert entry_points("interp.commands", [str(tmp_path / "missing"), str(tmp_path / "b")]) == [
        ("tool", "old.cli:app")
    ]
    assert parse("[g]\n a = m:f \n[h]\nb = n:g\n", "g") == [("a", "m:f")]


def test_module_docstring_fast_path_agrees_with_ast():
    import ast

    from interp.cli.plugins import module_docstring

    cases = [
        '"""Plain."""\nx = 1\n',
        '# coding: utf-8\n\n"""After a comment.\n\nMore."""\n',
        "r'''Raw one.'''\n",
        "x = 1\n",
        '"""Escaped \\\\n line."""\n',
        '"single line string"\n',
    ]
    for source in cases:
        assert module_docstring(source) == (ast.get_docstring(ast.parse(source)) or ""), source


BAD_VALUES = (
    ["attribute", "build", "--model", "m", "--train", "t", "--out", "{out}", "--dim", "0"],
    ["attribute", "build", "--model", "m", "--train", "t", "--out", "{out}", "--projection", "pca"],
    ["attribute", "query", "--store", "{out}", "--queries", "q", "--top", "0"],
    ["attribute", "query", "--store", "{out}", "--queries", "q", "--precondition", "adam"],
)


def test_a_bad_value_is_refused_before_torch_is_imported(tmp_path):
    """`attribute build` / `query` check their simple values first: one error line, exit 2, no torch, no folder."""
    for args in BAD_VALUES:
        out = tmp_path / "out"
        args = [a.replace("{out}", str(out)) for a in args]
        probe = (
            "from interp.cli.main import app\nimport sys, json\ntry:\n    app(" + repr(args) + ", prog_name='interp')\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print(json.dumps([code, sorted({m.split('.')[0] for m in sys.modules} & set("
            + repr(LIBRARIES[:-1])
            + "))]))"
        )
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
        code, heavy = json.loads(proc.stdout.strip().splitlines()[-1])
        assert code == 2 and heavy == [], (args, heavy, proc.stderr)
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
        assert not out.exists()
