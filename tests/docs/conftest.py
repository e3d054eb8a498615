"""The API-reference build (`docs/build_api.py`, about 30 s of imports and rendering in one process) starts in the
background when its test is collected, so it runs on the second core while the tests before it run;
`test_every_module_has_a_page` waits for it (fixture `api_build`)."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHOLE_BUILD = "test_every_module_has_a_page"
_build: dict = {}


def pytest_collection_modifyitems(config, items):
    if _build or not any(item.name == WHOLE_BUILD for item in items):
        return
    if not _has_pdoc():
        return  # the test skips, saying why
    out = Path(tempfile.mkdtemp(prefix="api-docs-"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(ROOT / "docs" / "build_api.py"), "--out", str(out / "api")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _build.update(proc=proc, out=out)


def _has_pdoc() -> bool:
    import importlib.util

    return importlib.util.find_spec("pdoc") is not None


@pytest.fixture
def api_build():
    """(exit code, stdout + stderr, output folder) of the whole build started at collection."""
    if not _build:
        pytest.fail("the background API build was not started (run the test through pytest's collection)")
    out, err = _build["proc"].communicate(timeout=900)
    return _build["proc"].returncode, out + err, _build["out"] / "api"


def pytest_sessionfinish(session, exitstatus):
    if _build:
        if _build["proc"].poll() is None:
            _build["proc"].kill()
            _build["proc"].communicate()
        shutil.rmtree(_build["out"], ignore_errors=True)
