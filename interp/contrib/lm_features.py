"""SmolLM2's own cached activations for the contrib experiments, through `interp`'s caching and store API.

Several second-wave papers (GEM, SAFER, GFD-EMVC, SourceScreen, CoupledPI, PACE's coding rates, RDMReg's
score, MoE-NoiseFilter) need the same thing: residual-stream rows of a real LM over a few text corpora on
this machine. This module caches them once per (model weights, corpus tokens, size) into an `ActivationStore`
with `interp.cache.caching.cache_activations` (resumable, hashed shards) and reads them back as plain tensors. The
cache is keyed by the weights' sha256 and the corpus digest; a store computed from other weights or other
text is refused (`StaleCacheError`) or, with `rebuild=True`, recomputed.

    store = corpus_store("stdlib-docs", n_seq=32)          # cached under contrib_cache_root()
    X, idx = token_rows(store, "blocks.12.hook_resid_post") # rows at positions >= 1 (see below)
    S = sequence_means(store, "blocks.12.hook_resid_post")  # one mean-pooled vector per sequence

Position 0 of every SmolLM2 row carries massive activations (~80x the mean norm at mid depth), so every
reader here drops it by default (`skip_first=True`) and the experiments record that choice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import Tensor

DEFAULT_LAYERS = (6, 12, 18, 24, 29)
"""Residual-stream layers cached by default (SmolLM2-135M has 30 blocks)."""
CORPORA = ("stdlib-docs", "stdlib", "pydoc-topics")
"""Python docstrings, Python source code, the reference manual's topic texts: all three fixed by the Python
version, so the README numbers measured on them do not depend on the machine's installed packages (the
earlier third corpus, usr-share-doc, did: SAFER's SmolLM2 AUROCs differed between two machines, issue 30)."""


def depth_layers(n_layers: int, grid: tuple[int, ...] = DEFAULT_LAYERS, of: int = 30) -> tuple[int, ...]:
    """`grid`, layers of an `of`-layer model, moved to the same relative depths of an `n_layers`-layer model:
    SmolLM2's (6, 12, 18, 24, 29) are themselves for 30 layers and (4, 7, 11, 14, 17) for Gemma 3 270M's 18."""
    if n_layers < 1 or of < 2:
        raise ValueError(f"n_layers must be >= 1 and of >= 2; got n_layers={n_layers}, of={of}")
    return tuple(sorted({round(layer * (n_layers - 1) / (of - 1)) for layer in grid}))


def adds_bos(tokenizer) -> bool:
    """Whether the tokenizer's own convention puts BOS first (Gemma's does; SmolLM2's, Pythia's do not)."""
    bos = getattr(tokenizer, "bos_token_id", None)
    return bos is not None and list(tokenizer("a")["input_ids"][:1]) == [bos]


def bos_first(tokens: Tensor, tokenizer) -> Tensor:
    """Corpus rows as the model was trained to read them: for a tokenizer that puts BOS first, each row shifted
    right by one with BOS in front (its last token dropped, same length); other rows unchanged. Corpus rows are
    windows of the joined documents and carry no BOS: Gemma 3 270M reads them at a next-token loss of 7.2 nats
    against 4.0 with BOS first (SmolLM2: 4.10 vs 4.14), so without this its activations are off its distribution."""
    if not adds_bos(tokenizer):
        return tokens
    bos = torch.full((len(tokens), 1), tokenizer.bos_token_id, dtype=tokens.dtype)
    return torch.cat([bos, tokens[:, :-1]], 1)


def contrib_cache_root() -> Path:
    """Folder of the cached stores: $INTERP_CONTRIB_CACHE, else ~/.cache/interp-toolkit/contrib."""
    env = os.environ.get("INTERP_CONTRIB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "interp-toolkit" / "contrib"


def hook_name(layer: int) -> str:
    return f"blocks.{layer}.hook_resid_post"


class BosFirstError(ValueError):
    """A model whose tokenizer puts BOS first, asked for a store of BOS-less corpus windows."""


class StaleCacheError(ValueError):
    """A cached store was computed from other weights or other tokens than the ones asked for now."""


KEY_FILE = "contrib_key.json"
"""Written beside a store's manifest: the weights hash and corpus digest the store was computed from."""


def cache_key(loaded, corpus: str, n_seq: int, ctx_len: int, sample: int = 0) -> dict[str, str]:
    """{"model_sha256", "corpus_digest"}: the loaded model's weights hash (its provenance's, else a hash of its
    tensors) and the sha256 of the token ids `corpus_store` feeds it (the corpus tokenized by its tokenizer,
    its documents shuffled with seed `sample`)."""
    from interp.data import resolve_corpus
    from interp.models.registry import state_sha256

    weights = loaded.provenance.get("weights_sha256") or state_sha256(loaded.hf_model)
    tokens = resolve_corpus(corpus, loaded.tokenizer, ctx_len=ctx_len, max_tokens=n_seq * ctx_len, seed=sample)
    return {"model_sha256": weights, "corpus_digest": tokens.digest()}


def store_path(
    corpus: str,
    n_seq: int,
    ctx_len: int,
    model: str,
    layers: tuple[int, ...] = DEFAULT_LAYERS,
    root: str | Path | None = None,
    key: dict[str, str] | None = None,
    sample: int = 0,
) -> Path:
    """Where `corpus_store` keeps the store of these settings; with a `cache_key`, the folder name ends with
    the first 12 hex digits of the weights hash and of the corpus digest, so other weights or other text never
    share a folder. A data sample other than 0 adds `_s{sample}` to the corpus part of the name."""
    tag = "-".join(map(str, layers))
    safe = corpus.replace(":", "_").replace("/", "_") + (f"_s{sample}" if sample else "")
    name = f"{model}_{safe}_{n_seq}x{ctx_len}_L{tag}"
    if key is not None:
        name += f"_w{key['model_sha256'][:12]}_c{key['corpus_digest'][:12]}"
    return Path(root or contrib_cache_root()) / name


def _check_fresh(out: Path, key: dict[str, str], store) -> None:
    """Raise StaleCacheError when the store in `out` was not computed from `key`'s weights and tokens."""
    path = out / KEY_FILE
    saved = json.loads(path.read_text()) if path.is_file() else {}
    recorded_digest = store.meta.data.get("digest")
    stale = {k: saved.get(k) for k in key if saved.get(k) != key[k]}
    if recorded_digest != key["corpus_digest"]:
        stale["manifest corpus digest"] = recorded_digest
    if stale:
        raise StaleCacheError(
            f"the cached store {out} is stale: it was computed from {stale}, but the model and corpus now give "
            f"{key}; delete the folder or pass rebuild=True to recompute it"
        )


def corpus_store(
    corpus: str,
    n_seq: int = 32,
    ctx_len: int = 64,
    model: str = "smollm2-135m",
    layers: tuple[int, ...] = DEFAULT_LAYERS,
    root: str | Path | None = None,
    loaded=None,
    rebuild: bool = False,
    sample: int = 0,
):
    """The `ActivationStore` of `model`'s residual stream at `layers` (+ `ln_final.hook_normalized`) over
    `n_seq` sequences of `ctx_len` tokens of `corpus`; computed on first use, then only read.

    `sample` is the data sample: the seed that shuffles the corpus's documents before they are cut into
    sequences (0, the default, is the sample every README number without a sample count was measured on).

    The cache is keyed by the weights hash and the corpus digest (`cache_key`); a complete store whose
    recorded key differs is refused with a `StaleCacheError`, or recomputed in place when `rebuild`.
    `loaded` is an already-loaded `HookedModel` to reuse (saves the ~20 s GGUF load per corpus); without it
    the model named `model` is loaded (its weights are needed to check the cache).
    """
    from interp.cache.caching import CacheConfig, cache_activations
    from interp.store import ActivationStore

    if n_seq <= 0 or ctx_len <= 1:
        raise ValueError(f"n_seq must be positive and ctx_len above 1; got n_seq={n_seq}, ctx_len={ctx_len}")
    if sample < 0:
        raise ValueError(f"sample must be a whole number >= 0 (a corpus shuffling seed); got {sample}")
    loaded = load_lm(model) if loaded is None else loaded
    if adds_bos(loaded.tokenizer):
        raise BosFirstError(
            f"{model}'s tokenizer puts BOS first, but the cached stores are windows of the joined corpus without "
            "one, which such a model reads off its distribution; use a model whose tokenizer adds no BOS "
            "(smollm2-135m, pythia-*), or run the experiment on rows from `bos_first`"
        )
    key = cache_key(loaded, corpus, n_seq, ctx_len, sample)
    out = store_path(corpus, n_seq, ctx_len, model, layers, root, key, sample)
    if (out / "manifest.json").is_file() and not rebuild:
        store = ActivationStore.open(out)
        if store.complete:
            if (
                not (out / KEY_FILE).is_file()
                and store.meta.model_sha256 == key["model_sha256"]
                and store.meta.data.get("digest") == key["corpus_digest"]
            ):
                _write_key(out, key)  # a run killed after the store was complete, before it wrote the key
            _check_fresh(out, key, store)
            return store
    hooks = [hook_name(l) for l in layers] + ["ln_final.hook_normalized"]
    cfg = CacheConfig(
        out=str(out),
        model=model,
        hooks=hooks,
        data=corpus,
        max_tokens=n_seq * ctx_len,
        ctx_len=ctx_len,
        seqs_per_shard=max(n_seq, 1),
        batch_size=8,
        seed=sample,
    )
    (out / KEY_FILE).unlink(missing_ok=True)  # a store is created only in a folder holding nothing else
    store, _ = cache_activations(cfg, model=loaded, progress=False, overwrite=rebuild)
    _write_key(out, key)
    return store


def _write_key(out: Path, key: dict[str, str]) -> None:
    """Write KEY_FILE atomically: a kill leaves the old file or the new one, never half of one."""
    from interp.store.atomic import atomic_write_bytes

    atomic_write_bytes(out / KEY_FILE, json.dumps(key, indent=1).encode())


def token_rows(store, hook: str, skip_first: bool = True) -> tuple[Tensor, dict[str, Tensor]]:
    """(rows [n, d] float32, index columns {"seq", "pos", "tokens"}) of one hook, position 0 dropped."""
    data = store.get_rows(slice(0, len(store)), hooks=[hook])
    keep = data["pos"] > 0 if skip_first else torch.ones_like(data["pos"], dtype=torch.bool)
    idx = {k: data[k][keep] for k in ("seq", "pos", "tokens")}
    return data[hook][keep].float(), idx


def sequence_means(store, hook: str, skip_first: bool = True) -> Tensor:
    """One vector per sequence: the mean of its rows (position 0 dropped by default). [n_seq, d]."""
    x, idx = token_rows(store, hook, skip_first)
    seqs, inv = torch.unique(idx["seq"], return_inverse=True)
    out = torch.zeros(len(seqs), x.shape[1]).index_add_(0, inv, x)
    return out / torch.bincount(inv, minlength=len(seqs)).unsqueeze(1).float()


def load_lm(model: str = "smollm2-135m"):
    """Load the model once (to pass as `loaded=` to several `corpus_store` calls)."""
    import interp

    return interp.load_model(model)


def labelled_corpora(
    hook: str,
    n_seq: int = 32,
    ctx_len: int = 64,
    corpora: tuple[str, ...] = CORPORA,
    per_sequence: bool = True,
    model: str = "smollm2-135m",
    sample: int = 0,
    loaded=None,
    layers: tuple[int, ...] = DEFAULT_LAYERS,
) -> tuple[Tensor, Tensor]:
    """(features, corpus label) over several corpora (each shuffled with seed `sample`): mean-pooled sequences,
    or token rows when `per_sequence` is False. The model loads once (or is `loaded`), to key the caches."""
    xs, ys = [], []
    loaded = load_lm(model) if loaded is None else loaded  # its weights key the caches (`cache_key`)
    for c, name in enumerate(corpora):
        store = corpus_store(name, n_seq, ctx_len, model, layers, loaded=loaded, sample=sample)
        x = sequence_means(store, hook) if per_sequence else token_rows(store, hook)[0]
        xs.append(x)
        ys.append(torch.full((len(x),), c))
    return torch.cat(xs), torch.cat(ys)
