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
def test_every_module_has_a_page(api_build):
    code, output, out = api_build  # `python docs/build_api.py --out ...`, started at collection (conftest.py)
    assert code == 0, output[-3000:]
    missing = [name for name in _builder().module_names() if not (out / (name.replace(".", "/") + ".html")).exists()]
    assert missing == []
    text = (out / "interp" / "wrapper" / "hooked_model.html").read_text(encoding="utf-8")
    assert "run_with_cache" in text


def test_a_module_that_cannot_be_imported_fails_the_build(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "broken_doc_module.py").write_text('"""Docs."""\nraise RuntimeError("boom")\n')
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    problems = _builder().build(tmp_path / "out", ["broken_doc_module"])
    sys.modules.pop("broken_doc_module", None)
    assert len(problems) == 1 and "broken_doc_module" in problems[0]


_TYPE_CHECKING_ONLY = """from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from package_that_is_not_installed.layer.mode import Mode
"""


def _build(tmp_path, monkeypatch, name, own, **modules):
    """Build the page of module `name` from `modules` (name -> source) written under tmp_path; `own` names ours."""
    (tmp_path / "src").mkdir()
    for module, text in modules.items():
        (tmp_path / "src" / f"{module}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    notes = []
    try:
        problems = _builder().build(tmp_path / "out", [name], own=own, notes=notes)
    finally:
        for module in modules:
            sys.modules.pop(module, None)
    return problems, notes


# transformers 5.25's `PreTrainedModel.kernels_mode: Mode | None`, with `Mode` imported under TYPE_CHECKING from a
# module its pinned `kernels` release no longer has, in small: a base class another package owns, and ours.
THIRD_PARTY = (
    _TYPE_CHECKING_ONLY
    + '''
class Base:
    """Theirs."""
    mode: Mode | None = None
'''
)
OURS_SUBCLASS = '''"""Ours."""
from third_party_doc_base import Base


class Model(Base):
    """A subclass of another package's class: its inherited annotations are documented too."""
'''


def test_another_packages_type_checking_failure_is_a_note_not_a_failure(tmp_path, monkeypatch):
    problems, notes = _build(
        tmp_path,
        monkeypatch,
        "ours_doc_module",
        ("ours_doc_module",),
        third_party_doc_base=THIRD_PARTY,
        ours_doc_module=OURS_SUBCLASS,
    )
    assert problems == []
    assert len(notes) == 1 and "TYPE_CHECKING" in notes[0] and "Mode | None" in notes[0]
    assert (tmp_path / "out" / "ours_doc_module.html").exists()


def test_the_same_failure_counts_when_the_base_class_is_ours(tmp_path, monkeypatch):
    # Fresh module names: pdoc caches what it evaluated per module name.
    problems, notes = _build(
        tmp_path,
        monkeypatch,
        "ours_doc_module2",
        ("ours_doc_module2", "our_doc_base"),
        our_doc_base=THIRD_PARTY,
        ours_doc_module2=OURS_SUBCLASS.replace("third_party_doc_base", "our_doc_base"),
    )
    assert notes == [] and len(problems) == 1 and "TYPE_CHECKING" in problems[0]


def test_a_type_checking_failure_in_our_own_annotation_fails_the_build(tmp_path, monkeypatch):
    own = (
        _TYPE_CHECKING_ONLY
        + '''

def steer(mode: Mode | None = None) -> None:
    """Ours, with an annotation whose TYPE_CHECKING import is broken."""
'''
    )
    problems, notes = _build(tmp_path, monkeypatch, "ours_doc_module3", ("ours_doc_module3",), ours_doc_module3=own)
    assert notes == [] and len(problems) == 1 and "ours_doc_module3.steer" in problems[0]
