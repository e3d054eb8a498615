"""Packed suffix runs (`interp.patching.suffix`) equal the stacked copies run from the embeddings, on every family."""

import pytest
import torch

import interp
import interp.patching.activation as activation
from interp.data import byte_tokenizer
from interp.patching import activation_patching
from interp.patching.sites import make_sweep
from interp.patching.suffix import LAYERS_PER_RUN, can_pack, suffix_chunks
from tests.tiny import FAMILIES, tiny_family

SWEEPS = [("resid_pre", None), ("mlp_out", None), ("z", "head"), ("v", "pos_head"), ("resid_post", "layer")]


def pair(seed=0, batch=1, pos=9, differ_at=3):
    gen = torch.Generator().manual_seed(seed)
    clean = torch.randint(3, 256, (batch, pos), generator=gen)
    corrupted = clean.clone()
    corrupted[:, differ_at] = (clean[:, differ_at] + 1) % 256
    return clean, corrupted


def reference(model, clean, corrupted, kind, per, **kw):
    return activation_patching(model, clean, corrupted, kind, per=per, start_from_cache=False, **kw).values


@pytest.mark.parametrize("family", FAMILIES)
def test_packed_sweeps_equal_the_run_from_the_embeddings(family):
    model = interp.HookedModel(tiny_family(family), byte_tokenizer())
    clean, corrupted = pair(pos=7)  # shorter than the tiny Gemma 2/3's sliding window (8)
    if not can_pack(model, make_sweep(model, "resid_pre", None, None, None, 7), (), 7):
        assert not model.adapter.packs_suffixes, family  # Bloom only
    for kind, per in SWEEPS:
        if kind == "resid_mid" and model.adapter.is_parallel(model.config):
            continue
        fast = activation_patching(model, clean, corrupted, kind, per=per, answer=5, wrong=7).values
        slow = reference(model, clean, corrupted, kind, per, answer=5, wrong=7)
        assert (fast - slow).abs().max() < 1e-4, (family, kind, (fast - slow).abs().max())


def metric_reading_every_position(logits):
    return logits[0, :, 5].sum() - logits[0, -1, 7]


@pytest.mark.parametrize("kind, per", SWEEPS + [("k", "head"), ("q", "pos_head"), ("attn_out", None)])
def test_a_metric_of_every_position_sees_the_corrupted_logits_before_the_patch(kind, per):
    model = interp.HookedModel(tiny_family("llama"), byte_tokenizer())
    clean, corrupted = pair(seed=1)
    fast = activation_patching(model, clean, corrupted, kind, per=per, metric=metric_reading_every_position).values
    slow = reference(model, clean, corrupted, kind, per, metric=metric_reading_every_position)
    assert (fast - slow).abs().max() < 1e-4


def test_padded_batches_and_several_chunks_per_layer():
    model = interp.HookedModel(tiny_family("qwen2"), byte_tokenizer())
    clean, corrupted = pair(seed=2, batch=2, pos=12, differ_at=2)
    mask = torch.ones_like(clean)
    mask[1, 9:] = 0  # right padding of the second row
    clean_in = {"input_ids": clean, "attention_mask": mask}
    corrupted_in = {"input_ids": corrupted, "attention_mask": mask}
    for kind, per in [("resid_pre", None), ("z", "pos_head")]:
        fast = activation_patching(model, clean_in, corrupted_in, kind, per=per, max_rows=4).values
        slow = reference(model, clean_in, corrupted_in, kind, per)
        assert (fast - slow).abs().max() < 1e-4, kind


def test_sites_before_the_first_difference_score_the_corrupted_run_without_a_forward(monkeypatch):
    model = interp.HookedModel(tiny_family("llama"), byte_tokenizer())
    clean, corrupted = pair(seed=3, pos=10, differ_at=7)
    rows = []
    original = activation.SuffixRuns.scores

    def counting(self, sweep, chunk, srcs):
        rows.extend(10 - first for _, _, first in chunk)
        return original(self, sweep, chunk, srcs)

    monkeypatch.setattr(activation.SuffixRuns, "scores", counting)
    res = activation_patching(model, clean, corrupted, "resid_pre", answer=5, wrong=7)
    # layer 0 (the embeddings): position 7 only, 3 rows; layer 1: positions 7, 8, 9, their suffixes only
    assert model.n_layers == 2 and rows == [3, 3, 2, 1]
    assert torch.all(res.values[:, :7] == res.baseline)


def test_what_sees_the_stacked_copies_keeps_them():
    model = interp.HookedModel(tiny_family("llama"), byte_tokenizer())
    sweep = make_sweep(model, "resid_pre", None, None, None, 9)
    assert not can_pack(model, sweep, [("blocks.0.hook_resid_pre", lambda t, hook: t)], 9)  # caller's hooks
    assert not can_pack(model, make_sweep(model, "pattern", None, None, None, 9), (), 9)
    model.add_hook("blocks.0.hook_resid_pre", lambda t, hook: t)
    assert not can_pack(model, sweep, (), 9)  # persistent hooks
    model.reset_hooks()
    assert can_pack(model, sweep, (), 9)


def test_chunks_hold_at_most_the_row_cap_and_a_few_layers():
    live = [(layer, (p,), p) for layer in range(6) for p in range(18, 20)]
    chunks = suffix_chunks(live, 20, 1, 16)
    assert [s for c in chunks for s in c] == live
    assert all(sum(20 - f for _, _, f in c) <= 64 for c in chunks)
    assert all(max(c)[0] - min(c)[0] < LAYERS_PER_RUN for c in chunks) and len(chunks) == 2
    long = [(0, (p,), p) for p in range(20)]
    assert all(sum(20 - f for _, _, f in c) <= 64 for c in suffix_chunks(long, 20, 1, 16))


def test_a_prompt_past_the_sliding_window_runs_the_stacked_copies():
    model = interp.HookedModel(tiny_family("gemma2"), byte_tokenizer())
    clean, corrupted = pair(seed=4, pos=10)
    assert not can_pack(model, make_sweep(model, "resid_pre", None, None, None, 10), (), 10)
    fast = activation_patching(model, clean, corrupted, "resid_pre", answer=5, wrong=7).values
    assert (fast - reference(model, clean, corrupted, "resid_pre", None, answer=5, wrong=7)).abs().max() < 1e-4


def test_a_subset_of_layers_in_any_order_keeps_the_sweep_order():
    model = interp.HookedModel(tiny_family("llama", num_hidden_layers=4), byte_tokenizer())
    clean, corrupted = pair(seed=5)
    kw = dict(answer=5, wrong=7, layers=[3, 0, 2])
    fast = activation_patching(model, clean, corrupted, "resid_pre", **kw).values
    slow = activation_patching(model, clean, corrupted, "resid_pre", start_from_cache=False, **kw).values
    assert fast.shape == (3, 9) and (fast - slow).abs().max() < 1e-4
