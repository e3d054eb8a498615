"""`make docs`: the API reference builds from every module's docstrings, and a module that cannot be documented
fails the build."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("pdoc", reason="pdoc is a dev dependency: pip install -e '.[dev]'")


def _builder():
    spec = importlib.util.spec_from_file_location("build_api", ROOT / "docs" / "build_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_module_has_a_page(tmp_path):
    builder = _builder()
    assert builder.build(tmp_path) == []
    missing = [name for name in builder.module_names() if not (tmp_path / (name.replace(".", "/") + ".html")).exists()]
    assert missing == []
    text = (tmp_path / "interp" / "wrapper" / "hooked_model.html").read_text(encoding="utf-8")
    assert "run_with_cache" in text


def test_a_module_that_cannot_be_imported_fails_the_build(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "broken_doc_module.py").write_text('"""Docs."""\nraise RuntimeError("boom")\n')
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    problems = _builder().build(tmp_path / "out", ["broken_doc_module"])
    sys.modules.pop("broken_doc_module", None)
    assert len(problems) == 1 and "broken_doc_module" in problems[0]
