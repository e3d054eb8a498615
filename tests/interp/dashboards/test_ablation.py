"""Per-token ablation effects (`interp.dashboards.ablation`) on a tiny llama built in the test: the batched
numbers equal one forward per ablated position, a zero direction gives 0, and the page's hover shows them."""

import pytest
import torch

from interp.dashboards import DashboardConfig, TensorSource, Vocab, collect
from interp.dashboards.ablation import WindowAblation, next_token_loss_deltas
from interp.dashboards.build import records
from interp.dashboards.page import feature_fragment
from interp.data import byte_tokenizer
from interp.wrapper.hooked_model import HookedModel
from tests.tiny import tiny_hf

HOOK = "blocks.0.hook_resid_post"


def _setup(arch="llama"):
    model = HookedModel(tiny_hf(arch), byte_tokenizer())
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, generator=g)
    d = 3 * torch.randn(64, generator=g)
    coef = lambda x: torch.relu(x @ w)  # noqa: E731 - the feature's value on hook rows
    return model, w, d, coef


@torch.no_grad()
def _hook_rows(model, ids):
    seen = {}
    model.run_with_hooks(ids[None], fwd_hooks=[(HOOK, lambda t, h: seen.__setitem__("x", t[0].clone()))])
    return seen["x"]


@torch.no_grad()
def _slow(model, ids, p, d, a):
    """One forward with the feature removed at position p alone; loss on token p+1 minus the clean one."""

    def ablate(t, hook):
        t = t.clone()
        t[0, p] -= a * d
        return t

    ce = torch.nn.functional.cross_entropy
    clean = ce(model(ids[None])[0, p], ids[p + 1])
    return float(ce(model.run_with_hooks(ids[None], fwd_hooks=[(HOOK, ablate)])[0, p], ids[p + 1]) - clean)


@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "gemma3"])  # gemma3: a sliding window of 8 < 24 tokens
def test_batched_deltas_equal_one_forward_per_position(arch):
    model, w, d, coef = _setup(arch)
    ids = torch.randint(0, 257, (24,), generator=torch.Generator().manual_seed(1))
    a = coef(_hook_rows(model, ids))
    fires = [p for p in range(23) if a[p] > 0]
    assert len(fires) >= 5
    fast = next_token_loss_deltas(model, HOOK, ids, fires + [23], d, coef, max_batch=3)  # 23: no next token
    assert sorted(fast) == fires
    slow = {p: _slow(model, ids, p, d, float(a[p])) for p in fires}
    assert max(abs(fast[p] - slow[p]) for p in fires) < 1e-5
    assert max(abs(v) for v in slow.values()) > 1e-3  # the check is not vacuous
    # removing it at every firing position in one forward is a different thing: later losses see the earlier ones
    every = torch.zeros(24, 64)
    every[fires] = a[fires, None] * d
    ce = torch.nn.functional.cross_entropy
    with torch.no_grad():
        lg = model.run_with_hooks(ids[None], fwd_hooks=[(HOOK, lambda t, h: t - every[None])])[0]
        joint = ce(lg[:-1], ids[1:], reduction="none") - ce(model(ids[None])[0, :-1], ids[1:], reduction="none")
    assert max(abs(float(joint[p]) - slow[p]) for p in fires[1:]) > 1e-4


def test_zero_direction_gives_zero():
    model, _, _, coef = _setup()
    ids = torch.randint(0, 257, (16,), generator=torch.Generator().manual_seed(2))
    out = next_token_loss_deltas(model, HOOK, ids, list(range(15)), torch.zeros(64), coef)
    assert out == dict.fromkeys(range(15), 0.0)


def test_page_hover_shows_the_deltas_of_each_top_window():
    model, w, d, coef = _setup()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 257, (6 * 20,), generator=g)
    seq, pos = torch.arange(len(ids)) // 20, torch.arange(len(ids)) % 20
    acts = torch.cat([coef(_hook_rows(model, ids[seq == s]))[:, None] for s in range(6)])
    src = TensorSource(acts, ids, seq, pos)
    cfg = DashboardConfig(features=[0])
    stats = collect(src, 1, cfg.stats, progress=False)
    rec = records(stats, src, Vocab(byte_tokenizer()), [0], cfg)[0]
    plain = feature_fragment(rec)
    assert "activation only (built without a model" in plain and "removing it here" not in plain
    abl = WindowAblation(model, HOOK, lambda f: d, lambda f, x: coef(x), label="tiny llama", max_batch=4, max_windows=3)
    abl.annotate(rec, src)
    checked = 0
    for c in rec["top"][:3]:
        s_ids = ids[seq == c["seq"]]
        for k, (v, dl) in enumerate(zip(c["values"], c["ablation"])):
            p = c["pos"] - c["target"] + k
            if v is not None and v > 0 and p + 1 < len(s_ids):
                assert abs(dl - _slow(model, s_ids, p, d, float(acts[seq == c["seq"]][p, 0]))) < 1e-5
                checked += 1
            else:
                assert dl is None
    assert checked >= 3 and all("ablation" not in c for c in rec["top"][3:])
    html = feature_fragment(rec)
    assert "removing it here changes the next token&#x27;s loss by" in html and "(tiny llama)" in html


def test_a_window_whose_sequence_start_is_missing_is_skipped():
    model, _, d, coef = _setup()
    ids = torch.randint(0, 257, (20,), generator=torch.Generator().manual_seed(4))
    acts = coef(_hook_rows(model, ids))[:, None]
    src = TensorSource(acts, ids, torch.zeros(20, dtype=torch.long), torch.arange(20) + 5)  # positions 0-4 absent
    cfg = DashboardConfig(features=[0])
    rec = records(collect(src, 1, cfg.stats, progress=False), src, Vocab(), [0], cfg)[0]
    WindowAblation(model, HOOK, lambda f: d, lambda f, x: coef(x)).annotate(rec, src)
    assert rec["top"] and all(v is None for c in rec["top"] for v in c["ablation"])  # the model never saw them
