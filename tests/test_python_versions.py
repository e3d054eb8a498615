"""`requires-python = ">=3.10"`: every module parses under Python 3.10's grammar and uses no standard-library
name that 3.10 lacks (CI runs the interpreter this machine has, so these are the checks that can run here)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    p
    for d in ("interp", "sae", "circuits", "attribution", "tests", "benchmarks", "docs")
    for p in sorted((ROOT / d).rglob("*.py"))
]

NEWER_THAN_310 = {
    # module or attribute -> the version that added it
    "tomllib": "3.11",
    "ExceptionGroup": "3.11",
    "BaseExceptionGroup": "3.11",
    "TaskGroup": "3.11",
    "StrEnum": "3.11",
    "ReprEnum": "3.11",
    "LiteralString": "3.11",
    "NotRequired": "3.11",
    "Required": "3.11",
    "Self": "3.11",
    "Never": "3.11",
    "assert_never": "3.11",
    "reveal_type": "3.11",
    "file_digest": "3.11",
    "add_note": "3.11",
    "getLevelNamesMapping": "3.11",
    "override": "3.12",
    "batched": "3.12",
}
"""Names 3.10 does not have (this file names them as strings only)."""


def _newer_names(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found |= {node.module or ""} | {a.name for a in node.names}
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found & set(NEWER_THAN_310)


def test_requires_python_is_310():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^requires-python = ">=3\.10"$', text, re.M)
    assert re.search(r'^target-version = "py310"$', text, re.M)


def test_every_module_parses_with_310_grammar_and_names():
    problems = []
    for path in SOURCES:
        src = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(src, filename=str(path), feature_version=(3, 10))
        except SyntaxError as e:
            problems.append(f"{path.relative_to(ROOT)}:{e.lineno}: {e.msg}")
            continue
        problems += [f"{path.relative_to(ROOT)}: {n} needs Python {NEWER_THAN_310[n]}" for n in _newer_names(tree)]
    assert problems == []


def test_the_check_finds_311_syntax_and_names():
    assert _newer_names(ast.parse("import tomllib\nfrom typing import Self")) == {"tomllib", "Self"}
    try:
        ast.parse("try:\n    pass\nexcept* ValueError:\n    pass\n", feature_version=(3, 10))
    except SyntaxError:
        pass
    else:  # pragma: no cover - the check would be blind
        raise AssertionError("except* parsed under 3.10 rules")
