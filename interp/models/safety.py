"""Refuse, in one clear sentence, model folders that could only be loaded by running code from the folder.

Two kinds of model folder run code when loaded: weights stored only as pickles (`pytorch_model.bin`,
`*.pt`, `*.ckpt`; unpickling runs whatever the file names), and folders whose `config.json` or
`tokenizer_config.json` ask for "remote code" (`auto_map`: Python files shipped in the folder). The
toolkit loads weights with `use_safetensors=True` and never passes `trust_remote_code`, so transformers
already refuses both, but with a long traceback or a misleading hint ("install sentencepiece"). These
checks run first and raise `UnsafeModelFolderError` (a `ValueError`) naming the folder, the files and
the fix.

    >>> check_model_folder(Path("models/pythia-tiny"))   # returns None, or raises
"""

from __future__ import annotations

import json
from pathlib import Path

PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")


class UnsafeModelFolderError(ValueError):
    """A model folder that cannot be loaded without running code from it."""


def _auto_map(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        cfg = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsafeModelFolderError(f"{path} is not valid JSON ({e}); the model folder is damaged") from None
    if not isinstance(cfg, dict):
        raise UnsafeModelFolderError(f"{path} does not hold a JSON object; the model folder is damaged")
    auto = cfg.get("auto_map")
    return auto if auto else None


def check_model_folder(folder: str | Path) -> None:
    """Raise `UnsafeModelFolderError` for a folder with pickle-only weights or a remote-code config."""
    folder = Path(folder)
    for name in ("config.json", "tokenizer_config.json"):
        auto = _auto_map(folder / name)
        if auto:
            classes = ", ".join(f"{k} -> {v}" for k, v in list(auto.items())[:3])
            raise UnsafeModelFolderError(
                f"{folder} asks to run its own Python code ({name} has auto_map: {classes}); the toolkit never "
                "runs code from model folders. Use a model whose architecture transformers ships, or remove "
                "auto_map after checking the code"
            )
    safetensors = list(folder.glob("*.safetensors"))
    pickles = sorted(
        p.name
        for pat in PICKLE_WEIGHTS
        for p in folder.glob(pat)
        if p.name not in ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth")
    )
    if not safetensors and pickles:
        raise UnsafeModelFolderError(
            f"{folder} has weights only as pickle files ({', '.join(pickles[:3])}); loading a pickle can run any "
            "code inside it, so the toolkit reads safetensors only. Convert it where you trust the file: "
            "AutoModelForCausalLM.from_pretrained(folder).save_pretrained(folder, safe_serialization=True)"
        )
