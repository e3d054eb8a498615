"""Hugging Face hub ids as model specs (`org/name`, `org/name@REV`), through the standard HF cache.

How a spec is told from a local path (the registry applies this rule, in this order):

1. `hf:org/name[@REV]` is always a hub id; a spec starting `/`, `./`, `../` or `~` is always a path
   (`./org/name` for a folder that happens to look like a hub id).
2. A spec that exists on disk (the part before the last '@') is a local path: `runs/tiny@200` is step_200
   of a training run, `runs/tiny` its latest step.
3. Otherwise `org/name` (exactly one '/', hub-id characters: letters, digits, '-', '_', '.') is a hub id,
   and what follows its '@' a branch, tag or commit: `EleutherAI/pythia-70m@step3000`.

Files come through `huggingface_hub.snapshot_download` into the standard HF cache (`HF_HUB_CACHE`, the one
transformers, TransformerLens, nnsight and sae-lens use): config, tokenizer and safetensors files only, never
pickled weights (`pytorch_model.bin`). `HF_TOKEN` works through huggingface_hub. With `HF_HUB_OFFLINE=1`, or
when the hub cannot be reached, the model loads from the cache alone; a model in neither place is one
`NotCachedError` naming the id, the revision and the two ways to get it. The config is checked before any
weights are downloaded or read: seq2seq and encoder-only models, and model types with no hook adapter, are
refused with a `HubModelError` (a `ValueError`) that says why.

    >>> hf_model, tokenizer, provenance = load_hub("EleutherAI/pythia-70m", "step3000", torch.float32)
    >>> provenance["commit_sha"], provenance["source"]      # ('<40 hex>', 'hub' or 'hf-cache')
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

from interp.infra.portable import TOKENIZER_FILES as PORTABLE_TOKENIZER_FILES
from interp.models.provenance import interp_home, weights_sha256
from interp.models.safety import PICKLE_WEIGHTS, check_model_folder

if TYPE_CHECKING:  # pragma: no cover
    import torch

HUB_PREFIX = "hf:"
"""Forces the hub reading of a spec: `hf:org/name@REV`."""
PATH_PREFIXES = ("/", "./", "../", "~")
"""Force the local-path reading of a spec."""
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]*[A-Za-z0-9_]", re.ASCII)
_LEGACY_ID = re.compile(r"[A-Za-z0-9][\w.-]*[A-Za-z0-9_]", re.ASCII)
"""The hub's early repos have no organisation (`gpt2`): hub ids only when forced, `hf:gpt2`."""

INDEX = "model.safetensors.index.json"
CONFIG_FILES = ("config.json", "generation_config.json", INDEX)
"""Read before any weights are downloaded: the refusals below need nothing else."""
TOKENIZER_FILES = (*PORTABLE_TOKENIZER_FILES, "chat_template.jinja")
"""What a tokenizer needs from the repo: the files the toolkit's tokenizer identity hashes, and the chat template."""
_TOKENIZER_MARKERS = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
_NOT_WEIGHTS = ("training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth")
BYTE_VOCAB = 257
"""The byte tokenizer's size: a model this small may come without tokenizer files (it was trained on bytes)."""


class HubModelError(ValueError):
    """A hub model the toolkit refuses or cannot find; the message names the id, the revision and the fix."""


class NotCachedError(HubModelError):
    """A hub model that is not in the HF cache while the hub cannot be reached (or HF_HUB_OFFLINE=1)."""


def is_hub_id(text: str) -> bool:
    """True for `org/name` (exactly one '/', hub-id characters), the part of a spec before '@'."""
    return bool(_HUB_ID.fullmatch(text)) and "--" not in text and ".." not in text


def split_revision(spec: str) -> tuple[str, str | None]:
    """ "org/name@step3000" -> ("org/name", "step3000"); "org/name" -> ("org/name", None). Hub ids have no '@'."""
    repo_id, at, revision = spec.removeprefix(HUB_PREFIX).partition("@")
    if at and not revision:
        raise HubModelError(f"empty revision in {spec!r}: write ORG/NAME@REV (a branch, tag or commit)")
    legacy = spec.startswith(HUB_PREFIX) and _LEGACY_ID.fullmatch(repo_id) and "--" not in repo_id
    if not (is_hub_id(repo_id) or legacy):
        raise HubModelError(f"{repo_id!r} is not a hub id: write ORG/NAME (one '/', letters, digits, '-', '_', '.')")
    return repo_id, revision or None


@dataclass(frozen=True)
class Snapshot:
    """A hub model's files at one commit, in the HF cache."""

    repo_id: str
    revision: str
    """The revision asked for ("main" when none was)."""
    folder: Path
    """`.../models--ORG--NAME/snapshots/<commit sha>`."""
    source: str
    """"hub" (the hub answered and the files are current) or "hf-cache" (offline: the cache alone)."""
    weights: tuple[str, ...] = ()
    """The safetensors files the model loads from (others in the folder, if any, are not its weights)."""

    @property
    def commit_sha(self) -> str:
        return self.folder.name

    @property
    def label(self) -> str:
        return f"{self.repo_id}@{self.revision}"


def _unreachable(exc: BaseException) -> bool:
    """A network failure of whichever HTTP library huggingface_hub uses (httpx2 today; httpx, requests before)."""
    return isinstance(exc, (OSError, TimeoutError)) or type(exc).__module__.split(".")[0] in (
        "httpx2",
        "httpx",
        "requests",
        "urllib3",
    )


def _hub_files(repo_id: str, revision: str) -> tuple[list[str] | None, str]:
    """(the files of `repo_id` at `revision` on the hub, "") or (None, why the hub was not asked or not reached)."""
    from huggingface_hub import HfApi, constants, errors

    if constants.is_offline_mode():
        return None, "HF_HUB_OFFLINE=1"
    label = f"{repo_id}@{revision}"
    try:
        info = HfApi().model_info(repo_id, revision=revision)
    except errors.GatedRepoError:
        raise HubModelError(
            f"{repo_id} is gated: accept its terms on its hub page, then set HF_TOKEN (or run `hf auth login`)"
        ) from None
    except errors.RepositoryNotFoundError:
        raise HubModelError(
            f"no model {repo_id!r} on the hub (or it is private: set HF_TOKEN or run `hf auth login`); "
            f"for a local folder of that name write ./{repo_id}"
        ) from None
    except errors.RevisionNotFoundError:
        raise HubModelError(
            f"{repo_id} has no revision {revision!r} on the hub (a branch, tag or commit sha; "
            "the hub page lists them under 'Files and versions')"
        ) from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else 0
        if status and status < 500:
            raise HubModelError(f"the hub refused {label} (HTTP {status}): {str(exc).splitlines()[0]}") from None
        return None, f"the hub answered HTTP {status}"
    except Exception as exc:  # noqa: BLE001 - only network failures fall back to the cache; the rest re-raise
        if not _unreachable(exc):
            raise
        return None, f"the hub cannot be reached ({type(exc).__name__})"
    return [s.rfilename for s in info.siblings or []], ""


def repo_folder(repo_id: str) -> Path:
    """Where the HF cache keeps a model repo: `$HF_HUB_CACHE/models--ORG--NAME`."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}"


def cached_revisions(repo_id: str) -> list[str]:
    """The revisions (refs) of a repo whose snapshot in the HF cache has a config.json; no network, no torch."""
    root = repo_folder(repo_id)
    refs = root / "refs"
    found = []
    for ref in sorted(p for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []:
        if (root / "snapshots" / ref.read_text().strip() / "config.json").is_file():
            found.append(ref.relative_to(refs).as_posix())
    return found


def _not_cached(repo_id: str, revision: str, why: str) -> NotCachedError:
    """The one error for a model that is neither in the HF cache nor reachable: the id, the revision, two fixes."""
    folder = repo_folder(repo_id)
    cache, have = folder.parent, cached_revisions(repo_id)
    cached = f" (cached revisions: {', '.join(have)})" if have else ""
    unset = " (and unset HF_HUB_OFFLINE)" if "HF_HUB_OFFLINE" in why else ""
    return NotCachedError(
        f"{repo_id} revision {revision} is not in the HF cache {cache}{cached} and {why}. Get it one of two ways: "
        f"connect this machine to the hub{unset} and load it again; or, on a machine with "
        f"internet, run `hf download {repo_id} --revision {revision}` and copy its HF cache folder {folder.name} "
        f"into {cache}, or run `hf download {repo_id} --revision {revision} --local-dir DIR`, copy DIR here and "
        "pass DIR as the model"
    )


def _download(repo_id: str, revision: str, patterns: list[str], offline: str) -> Path:
    """`snapshot_download` of the files matching `patterns`; with `offline` (the reason) from the cache only."""
    from huggingface_hub import errors, snapshot_download

    try:
        folder = snapshot_download(repo_id, revision=revision, allow_patterns=patterns, local_files_only=bool(offline))
    except errors.LocalEntryNotFoundError:
        raise _not_cached(repo_id, revision, offline or "the hub cannot be reached") from None
    except errors.RevisionNotFoundError:
        raise HubModelError(f"{repo_id} has no revision {revision!r} on the hub") from None
    return Path(folder)


def _cached_files(snapshot: Snapshot) -> list[str]:
    """The repo's files at the snapshot's commit as the cache knows them: its tree listing, else the folder."""
    from huggingface_hub import get_cached_repo_tree
    from huggingface_hub.errors import CachedRepoTreeNotFoundError

    try:
        return [f.path for f in get_cached_repo_tree(snapshot.repo_id, revision=snapshot.commit_sha)]
    except CachedRepoTreeNotFoundError:  # a copied or hand-made cache has no listing: what the folder holds
        return sorted(p.name for p in snapshot.folder.iterdir())


def weight_files(files: list[str], snapshot: Snapshot) -> list[str]:
    """The safetensors files to download: the shards the index names, else `model.safetensors`.

    A repo whose weights are only pickles is refused: unpickling runs whatever code the file names."""
    names = {f for f in files if "/" not in f}
    if INDEX in names:
        index = snapshot.folder / INDEX
        if not index.is_file():
            raise HubModelError(f"{snapshot.label}: {INDEX} is listed but missing from the cached snapshot")
        return sorted(set(json.loads(index.read_text())["weight_map"].values()))
    if "model.safetensors" in names:
        return ["model.safetensors"]
    pickles = sorted(n for n in names if n not in _NOT_WEIGHTS and any(fnmatch(n, p) for p in PICKLE_WEIGHTS))
    if pickles:
        raise HubModelError(
            f"{snapshot.label} has its weights only as pickle files ({', '.join(pickles[:3])}); loading a pickle can "
            "run any code inside it, so the toolkit reads safetensors only. Look for a safetensors copy on another "
            "revision or an open 'refs/pr/N' conversion on the hub page, or convert it where you trust the file "
            "(AutoModelForCausalLM.from_pretrained(...).save_pretrained(DIR, safe_serialization=True)) and pass DIR"
        )
    raise HubModelError(f"{snapshot.label} has no model.safetensors or {INDEX}: not a transformers checkpoint")


def _read_config(snapshot: Snapshot) -> dict:
    path = snapshot.folder / "config.json"
    if not path.is_file():
        raise HubModelError(f"{snapshot.label} has no config.json: not a transformers model")
    config = json.loads(path.read_text())
    if not isinstance(config, dict) or not config.get("model_type"):
        raise HubModelError(f"{snapshot.label}: its config.json names no model_type")
    return config


def check_causal_lm(config: dict, label: str) -> None:
    """Refuse a seq2seq or encoder-only model: the toolkit hooks decoder-only causal LMs."""
    from transformers.models.auto import modeling_auto as auto

    causal, masked = auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    seq2seq = auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES
    model_type = config["model_type"]
    if config.get("is_encoder_decoder") or (model_type in seq2seq and model_type not in causal):
        raise HubModelError(
            f"{label} is a sequence-to-sequence (encoder-decoder) model ({model_type}); the toolkit hooks "
            "decoder-only causal language models"
        )
    # BERT-like types have a causal-LM class too, used only when the config says is_decoder
    causal_class = set(config.get("architectures") or []) & set(causal.values())
    encoder_only = model_type in masked and not config.get("is_decoder") and not causal_class
    if model_type not in causal or encoder_only:
        raise HubModelError(
            f"{label} is not a causal language model: model type {model_type!r} is encoder-only or has no "
            "AutoModelForCausalLM class in transformers; the toolkit hooks decoder-only causal language models"
        )


def check_adapter(model_type: str, label: str) -> None:
    """Refuse a model type with no hook adapter, naming the one file that would add it."""
    from interp.adapters import ADAPTERS

    if model_type not in ADAPTERS:
        raise HubModelError(
            f"{label}: no hook adapter for model type {model_type!r} (supported: {', '.join(sorted(ADAPTERS))}). "
            f"Add one file, interp/adapters/{model_type.replace('-', '_')}.py, whose Adapter(...) maps our hook "
            "names to its modules, registered with interp.adapters.register_adapter"
        )


def check_tokenizer(config: dict, files: list[str], label: str) -> None:
    """A model without tokenizer files loads only if its vocabulary is the byte tokenizer's (it was trained on
    bytes); any other would get token ids that mean nothing to it."""
    vocab = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
    if any(f in files for f in _TOKENIZER_MARKERS) or (vocab or 0) <= BYTE_VOCAB:
        return
    raise HubModelError(
        f"{label} ships no tokenizer files and its vocabulary has {vocab} tokens, so no tokenizer can be "
        "assumed; put the tokenizer it was trained with beside the weights in a local folder and pass that folder"
    )


def fetch(repo_id: str, revision: str | None = None) -> Snapshot:
    """The config, tokenizer and safetensors files of `repo_id` at `revision`, in the HF cache.

    The config comes first and is checked (causal LM, hook adapter, no remote code, a tokenizer), and the weight
    files are chosen (never pickles), before any weights are downloaded."""
    from huggingface_hub import constants

    revision = revision or constants.DEFAULT_REVISION
    files, offline = _hub_files(repo_id, revision)
    folder = _download(repo_id, revision, list(CONFIG_FILES), offline)
    snapshot = Snapshot(repo_id, revision, folder, "hf-cache" if offline else "hub")
    config = _read_config(snapshot)
    check_model_folder(folder)  # remote code (auto_map) is refused before anything else is fetched
    check_causal_lm(config, snapshot.label)
    check_adapter(config["model_type"], snapshot.label)
    files = _cached_files(snapshot) if files is None else files
    weights = weight_files(files, snapshot)
    check_tokenizer(config, files, snapshot.label)
    # the commit sha pins the weights to the commit whose config was checked, even if the branch moves meanwhile
    _download(repo_id, snapshot.commit_sha, [*CONFIG_FILES, *TOKENIZER_FILES, *weights], offline)
    return dataclasses.replace(snapshot, weights=tuple(weights))


def load_hub(repo_id: str, revision: str | None, dtype: torch.dtype, device_map=None):
    """(hf_model, tokenizer, provenance) of a hub model: eager attention, safetensors only, from the HF cache.

    `device_map` goes to `from_pretrained` as is ("auto": accelerate spreads the weights over the devices)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interp.data import byte_tokenizer
    from interp.infra.portable import tokenizer_identity
    from interp.models import memory

    snap = fetch(repo_id, revision)
    n_params = memory.parameter_count([snap.folder / name for name in snap.weights])
    # shown (and checked) before a single weight is loaded
    logging.getLogger(__name__).info(
        memory.check_fits(snap.label, n_params, dtype, memory.machine_memory_gb(), device_map is not None)
    )
    model = AutoModelForCausalLM.from_pretrained(
        snap.folder, dtype=dtype, attn_implementation="eager", use_safetensors=True, device_map=device_map
    )
    has_tokenizer = any((snap.folder / f).exists() for f in _TOKENIZER_MARKERS)
    tokenizer = AutoTokenizer.from_pretrained(snap.folder) if has_tokenizer else byte_tokenizer()
    provenance = {
        "source": snap.source,
        "repo_id": snap.repo_id,
        "revision": snap.revision,
        "commit_sha": snap.commit_sha,
        "path": str(snap.folder),
        # hashes are remembered outside the HF cache, which stays as huggingface_hub wrote it
        "weights_sha256": weights_sha256(snap.folder, side_dir=interp_home() / "hashes", names=snap.weights),
        "tokenizer": tokenizer_identity(tokenizer),
        "parameters": n_params,
        "memory_gb": round(memory.gigabytes(n_params, dtype), 3),
    }
    if device_map is not None:
        provenance["device_map"] = str(device_map)
    return model, tokenizer, provenance
