"""Shared fixtures for the data tests: an offline byte tokenizer and small on-disk text folders."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the hub

import pytest

from interp.data import byte_tokenizer


@pytest.fixture(scope="session")
def tok():
    return byte_tokenizer()
