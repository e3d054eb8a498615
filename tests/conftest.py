"""Shared test setup: offline hub, a private INTERP_HOME per session unless one is given."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
