"""Loading a local HF folder, a `.gguf` file, or one step of a training run (`run/step_N`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from interp.models.gguf import convert_gguf, gguf_file_type
from interp.models.provenance import cached_sha256, weights_sha256
from interp.models.safety import check_model_folder

if TYPE_CHECKING:  # pragma: no cover
    import torch

_STEP = re.compile(r"^step_(\d+)$")


def steps_of(run: Path) -> dict[int, Path]:
    """Checkpoint folders `step_N` of a training run, by N."""
    return {int(m[1]): p for p in run.iterdir() if p.is_dir() and (m := _STEP.match(p.name))}


def resolve_folder(path: str | Path, step: int | None = None) -> Path:
    """The HF folder to load: the folder itself, its `step_N` (given N), or its latest step."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such model path: {path}")
    if path.is_file():
        return path
    steps = steps_of(path)
    if step is not None:
        if step not in steps:
            known = ", ".join(map(str, sorted(steps))) or "none"
            raise FileNotFoundError(f"{path} has no step_{step}; steps there: {known}")
        return steps[step]
    if (path / "config.json").exists():
        return path
    if steps:
        return steps[max(steps)]
    raise FileNotFoundError(f"{path} holds neither config.json nor step_N checkpoint folders")


def _dequantised(quant: str, dtype) -> str:
    return (
        f"{quant} GGUF dequantised to {str(dtype).removeprefix('torch.')}: activations are those of the "
        "dequantised weights, not of the unquantised original"
    )


def _converted_facts(folder: Path, dtype) -> dict:
    """Provenance a converted folder's `interp_source.json` records (its GGUF, that file's hash and quantisation)."""
    from interp.infra.json_file import JsonFileError, read_json

    try:
        src = read_json(folder / "interp_source.json", what="converted-model record")
    except JsonFileError:
        return {}
    facts = {k: str(src[k]) for k in ("gguf", "gguf_sha256", "quantization") if isinstance(src.get(k), (str, int))}
    if "quantization" in facts:
        facts["weights"] = _dequantised(facts["quantization"], dtype)
    return facts


def load_local(path: str | Path, step: int | None, dtype: torch.dtype, device_map=None):
    """(hf_model, tokenizer, provenance) of a local folder or GGUF file, with eager attention.

    `device_map` goes to `from_pretrained` as is ("auto": accelerate spreads the weights over the devices)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interp.data import byte_tokenizer

    target = resolve_folder(path, step)
    provenance = {"source": str(target)}
    if target.suffix == ".gguf":
        quant = gguf_file_type(target)
        side = target.with_name(target.name + ".sha256.json")
        had_side = side.exists()
        try:
            provenance.update(gguf_sha256=cached_sha256(target), quantization=quant, weights=_dequantised(quant, dtype))
            target = convert_gguf(target)
        except BaseException:
            if not had_side:  # a refused file: leave its folder as it was (no hash cache beside it)
                side.unlink(missing_ok=True)
            raise
        provenance["converted"] = str(target)
    elif (target / "interp_source.json").is_file():  # a converted GGUF folder loaded by its path: keep its facts
        provenance.update(_converted_facts(target, dtype))
    check_model_folder(target)  # pickle-only weights or remote code: one clear refusal (interp.models.safety)
    model = AutoModelForCausalLM.from_pretrained(
        target, dtype=dtype, attn_implementation="eager", use_safetensors=True, device_map=device_map
    )
    has_tokenizer = any((target / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.json"))
    tokenizer = AutoTokenizer.from_pretrained(target) if has_tokenizer else byte_tokenizer()
    from interp.infra.portable import tokenizer_identity

    provenance.update(weights_sha256=weights_sha256(target), tokenizer=tokenizer_identity(tokenizer))
    if step is not None or _STEP.match(target.name):
        provenance["step"] = int(_STEP.match(target.name)[1]) if _STEP.match(target.name) else step
    return model, tokenizer, provenance
