"""Shared test setup: offline hub, a private INTERP_HOME per session unless one is given."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_collection_modifyitems(config, items):
    """Skip `cuda`-marked tests where there is no CUDA, unless INTERP_TEST_DEVICE names another device."""
    import pytest

    if os.environ.get("INTERP_TEST_DEVICE"):
        return
    try:
        import torch

        if torch.cuda.is_available():
            return
    except ImportError:
        pass
    skip = pytest.mark.skip(reason="needs CUDA (INTERP_TEST_DEVICE=cpu runs it on the CPU)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
