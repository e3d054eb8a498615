"""Missing extras (issue 29 cause 13): a paper whose optional dependency is absent is one line saying
`pip install -e ".[contrib]"` from the checkout, not a traceback; no hint names a package no index has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.refusals import assert_refused, invoke

ROOT = Path(__file__).resolve().parents[2]


def test_contrib_run_without_scikit_learn_is_one_line(monkeypatch):
    for name in ["sklearn", *(m for m in sys.modules if m.startswith("sklearn."))]:
        monkeypatch.setitem(sys.modules, name, None)  # `import sklearn(.x)` now fails as if it were not installed
    line = assert_refused(
        invoke(["contrib", "run", "FI-Bagging", "--quick"]), "scikit-learn", 'pip install -e ".[contrib]"'
    )
    assert str(ROOT) in line


def test_the_ray_hint_installs_from_the_checkout(monkeypatch):
    from interp.infra.jobs import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ray\]"'):
        import_ray()


def test_no_hint_names_a_package_no_index_has():
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    bad = [f for f in files if not f.startswith("tests/") and "interp-toolkit[" in (ROOT / f).read_text()]
    assert not bad, bad
