"""CUDA tests: marked `cuda`, skipped without a GPU; `INTERP_TEST_DEVICE=cpu` runs them on the CPU (a dry run)."""

import os

import pytest


@pytest.fixture(scope="session")
def device() -> str:
    """The device under test: "cuda" normally, or what INTERP_TEST_DEVICE says (e.g. "cpu" for a dry run)."""
    return os.environ.get("INTERP_TEST_DEVICE", "cuda")
