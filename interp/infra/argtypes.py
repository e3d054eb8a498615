"""argparse types for the scripts (benchmarks, experiments): a bad value is argparse's one `error:` line and
exit 2, before anything is read or written."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {v}")
    return v


def non_negative_int(text: str) -> int:
    """An integer >= 0 (a layer index, a seed)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {v}")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return v


def _writable_ancestor(p: Path) -> None:
    q = p
    while not q.exists():
        q = q.parent
    if not q.is_dir():
        raise argparse.ArgumentTypeError(f"{q} is a file, so {p} cannot be created under it")
    if not os.access(q, os.W_OK):
        raise argparse.ArgumentTypeError(f"{q} is not writable: choose another path than {p}")


def out_file(text: str) -> str:
    """A file path to write: not a folder; its folder exists and is writable, or can be created."""
    p = Path(text)
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: give a file name")
    if p.exists() and not os.access(p, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} is not writable: choose another path")
    _writable_ancestor(p.parent)
    return text


def out_dir(text: str) -> str:
    """A folder to write into: not a file; created later (its nearest existing parent must be writable)."""
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file: give a folder")
    _writable_ancestor(p)
    return text


def sae_folder(text: str) -> str:
    """An SAE folder (holds cfg.json)."""
    if not (Path(text) / "cfg.json").is_file():
        raise argparse.ArgumentTypeError(f"{text}: no cfg.json there (an SAE folder of `interp sae train` or sae-lens)")
    return text


def store_folder(text: str) -> str:
    """An activation store folder (holds manifest.json)."""
    if not (Path(text) / "manifest.json").is_file():
        raise argparse.ArgumentTypeError(f"{text}: no manifest.json there (a store written by `interp cache`)")
    return text
