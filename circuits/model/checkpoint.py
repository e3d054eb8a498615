"""Loading the model to extract a circuit from: `--model SPEC|PATH|PATH@N`, as everywhere in the toolkit.

A named spec (`smollm2-135m`, `pythia-70m:PATH`), a local HF folder, a `.gguf` file or a training run's
`PATH@N` (its `step_N` checkpoint) go to `interp.load_model`; a lone `.safetensors` file is read here
with the config.json beside it.

Everything goes through the core (`interp.load_model`, `interp.HookedModel`), so any architecture the
core has an adapter for works. A pickle-based file (`.pt`, `.pth`, `.bin`, `.ckpt`, `.pkl`) is refused:
unpickling runs whatever code the file names. With `allow_torch_load=True` it is read with
`torch.load(weights_only=True)`, which only rebuilds tensors and plain containers and rejects anything else.

A lone `.safetensors` (or pickle) file needs the `config.json` of its model in the same folder.
Models trained by `circuits.finders.weight_sparse` get their AbsTopK activations back from their config.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

import interp
from interp.adapters import ADAPTERS

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle")


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message says why and what to do."""


def _check_config(folder: Path, what: Path) -> dict:
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{what} has no config.json beside it; put the model's HF config.json in {folder}")
    try:
        cfg = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{cfg_path} is not valid JSON: {exc}") from None
    model_type = cfg.get("model_type")
    if model_type not in ADAPTERS:
        raise CheckpointError(
            f"{what} is a {model_type!r} model, an architecture the toolkit cannot hook; supported model types: "
            f"{', '.join(sorted(ADAPTERS))} (add one with interp.adapters.register_adapter)"
        )
    return cfg


def _from_weights(folder: Path, weights: Path, source: Path, sha: str) -> interp.HookedModel:
    """Model from `folder/config.json` + a safetensors file, with transformers' own key renames (a GPT-NeoX
    `save_pretrained` file names its head `embed_out`, the module `lm_head`): see `interp.models.weights_file`."""
    from interp.data import byte_tokenizer
    from interp.infra.portable import tokenizer_identity
    from interp.models.weights_file import WeightsFileError, hf_model_from_weights

    try:
        hf = hf_model_from_weights(folder / "config.json", weights)
    except WeightsFileError as exc:
        raise CheckpointError(str(exc)) from None
    config = hf.config
    has_tok = any((folder / f).exists() for f in ("tokenizer.json", "tokenizer_config.json"))
    if has_tok:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
    else:
        tok = byte_tokenizer()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    prov = {
        "spec": str(source),
        "source": str(source),
        "weights_sha256": sha,
        "model_type": config.model_type,
        "tokenizer": tokenizer_identity(tok),
    }
    return interp.HookedModel(hf.eval(), tok, prov)


def _from_state_dict(folder: Path, state: dict, source: Path, sha: str) -> interp.HookedModel:
    """Model from a state dict read with torch.load(weights_only=True): written to a temporary safetensors
    file so that it loads through the same path (and the same key renames) as a .safetensors checkpoint."""
    import tempfile

    from safetensors.torch import save_file

    if not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{source} does not hold a flat state dict of tensors")
    with tempfile.TemporaryDirectory(prefix="interp-ckpt-") as tmp:
        weights = Path(tmp) / "model.safetensors"
        save_file({k: v.detach().contiguous().clone() for k, v in state.items()}, str(weights))
        return _from_weights(folder, weights, source, sha)


def resolve_device(device: str) -> str:
    """ "auto" -> cuda when available, else cpu; anything else is checked by torch."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CheckpointError(f"--device {device}: no CUDA device here; use --device cpu or auto")
    if not (device == "cpu" or device.startswith("cuda")):
        raise CheckpointError(f"unknown --device {device!r}; use auto, cpu or cuda[:N]")
    return device


def load_checkpoint(path: str | Path, device: str = "cpu", allow_torch_load: bool = False) -> interp.HookedModel:
    """A `HookedModel` from a model spec, an HF folder, `PATH@N`, a .safetensors file (config.json beside it) or a .gguf
    file."""
    from interp.models.provenance import sha256_file

    device = resolve_device(device)
    spec = str(path)
    path = Path(path)
    if not path.exists():
        if path.suffix.lower() in PICKLE_SUFFIXES + (".safetensors", ".gguf"):
            raise FileNotFoundError(f"no checkpoint at {path}")
        try:  # a named spec or PATH@N
            model = interp.load_model(spec, device=device)
        except (ValueError, FileNotFoundError, KeyError) as exc:
            raise CheckpointError(f"cannot load model {spec!r}: {exc}") from None
        from circuits.finders.weight_sparse import reinstall_from_config

        reinstall_from_config(model.hf_model)
        return model
    suffix = path.suffix.lower()
    if path.is_dir():
        if (path / "config.json").is_file():
            _check_config(path, path)
        model = interp.load_model(str(path), device=device)
    elif suffix == ".gguf":
        model = interp.load_model(str(path), device=device)
    elif suffix == ".safetensors":
        _check_config(path.parent, path)
        model = _from_weights(path.parent, path, path, sha256_file(path)).to(device)
    elif suffix in PICKLE_SUFFIXES:
        if not allow_torch_load:
            raise CheckpointError(
                f"refusing to unpickle {path}: loading a pickle runs any code inside it. Convert it to safetensors "
                "(safetensors.torch.save_file(state_dict, 'model.safetensors')) from a trusted environment, or pass "
                "--allow-torch-load to read it with torch.load(weights_only=True), which loads tensors only"
            )
        _check_config(path.parent, path)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - the unpickler's refusal, reported as ours
            raise CheckpointError(f"torch.load(weights_only=True) refused {path}: {str(exc).splitlines()[0]}") from None
        if not isinstance(state, dict):
            raise CheckpointError(f"{path} holds a {type(state).__name__}, not a state dict")
        model = _from_state_dict(path.parent, state, path, sha256_file(path)).to(device)
    else:
        raise CheckpointError(f"{path}: unknown checkpoint format {suffix!r}; give an HF folder, .safetensors or .gguf")
    from circuits.finders.weight_sparse import reinstall_from_config

    reinstall_from_config(model.hf_model)
    return model
