"""Four TransformerLens tutorials, cell by cell, on our model and on TransformerLens over the same weights.

The cells (`tests/interp/tutorials/`) are typed as TL's Main Demo, Exploratory Analysis Demo, Activation Patching
demo and ARENA 1.4.1 (IOI) write them; `model` is the one line changed. Each cell runs in a notebook-like
namespace on ours and on TL's, and every value the cell assigns (tensors, numbers, strings, lists of them) and
its last expression must agree. The three TL demos run against TL 3's `TransformerBridge` (unfolded, as ours);
the IOI exercises, written for a `HookedTransformer` with `fold_ln=True`, against that. On a grouped-query
model the cells that index k or v by query head must fail with an error that says why.
"""

from __future__ import annotations

import ast
import contextlib
import io
import warnings

import pytest
import torch

from tests.interp.analysis.helpers import wrap
from tests.interp.tutorials import TUTORIALS, Cell
from tests.interp.tutorials.cells import IMPORTS, TinyIOI

ATOL, RTOL = 1e-4, 1e-3


def comparable(value):
    """The value as tensors / numbers / strings (recursively), or None when it is not a value to compare."""
    from transformer_lens import FactoredMatrix

    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, FactoredMatrix):
        return value.AB.detach()
    if isinstance(value, (bool, int, float, str, torch.Size)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        items = [comparable(v) for v in value]
        return None if any(i is None and v is not None for i, v in zip(items, value)) else items
    return None


def assert_close(ours, theirs, where: str):
    if isinstance(ours, torch.Tensor):
        assert isinstance(theirs, torch.Tensor) and ours.shape == theirs.shape, f"{where}: {ours.shape} vs {theirs}"
        if ours.is_complex():  # eigenvalues
            ours, theirs = torch.view_as_real(ours), torch.view_as_real(theirs.to(ours.dtype))
        assert torch.allclose(ours.float(), theirs.float(), atol=ATOL, rtol=RTOL), f"{where}: values differ"
    elif isinstance(ours, float):
        assert theirs == pytest.approx(ours, abs=ATOL, rel=RTOL), f"{where}: {ours} vs {theirs}"
    elif isinstance(ours, list):
        assert isinstance(theirs, list) and len(ours) == len(theirs), f"{where}: {ours} vs {theirs}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_close(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, f"{where}: {ours!r} vs {theirs!r}"


def assigned_names(code: str) -> list[str]:
    """Names a cell binds at its top level (and in its top-level loops)."""
    names = []
    for node in ast.parse(code).body:
        for sub in ast.walk(node) if isinstance(node, (ast.For, ast.If, ast.With)) else [node]:
            targets = getattr(sub, "targets", None) or [getattr(sub, "target", None)]
            for target in targets:
                for name in ast.walk(target) if target is not None else []:
                    if isinstance(name, ast.Name):
                        names.append(name.id)
    return names


def run_cell(cell: Cell, ns: dict, seed: int):
    """Run a cell as a notebook does: statements, then the value of a last bare expression."""
    tree = ast.parse(cell.code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    # the cells' `torch.set_grad_enabled(False)` and seeds stay inside: no_grad and fork_rng restore both on exit
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(), torch.no_grad(), torch.random.fork_rng():
        warnings.simplefilter("ignore")
        torch.manual_seed(seed)
        exec(compile(tree, "<cell>", "exec"), ns)
        return None if last is None else eval(compile(ast.Expression(last.value), "<cell>", "eval"), ns)


def namespace(model) -> dict:
    ns = {"model": model, "TinyIOI": TinyIOI}
    with torch.no_grad():  # IMPORTS switches gradients off, as the tutorials do; leaving the block restores them
        exec(IMPORTS, ns)
    return ns


def reference(model, tutorial: str):
    """TL over the same weights: the bridge for TL's demos, a folded HookedTransformer for ARENA's IOI."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if tutorial != "ioi":
            return model.to_transformer_bridge()
        tl = model.to_transformer_lens()
        tl.process_weights_(fold_ln=True, center_writing_weights=False, center_unembed=False)
        return tl


MODELS = {"llama (4 kv heads)": dict(num_key_value_heads=4), "llama (GQA: 2 kv heads)": {}}


@pytest.mark.parametrize("arch", list(MODELS))
@pytest.mark.parametrize("tutorial", list(TUTORIALS))
def test_tutorial_cells_give_what_transformer_lens_gives(tutorial, arch):
    model = wrap("llama", **MODELS[arch])
    gqa = model.n_kv_heads != model.n_heads
    ours, theirs = namespace(model), namespace(reference(model, tutorial))
    try:
        for i, cell in enumerate(TUTORIALS[tutorial]):
            where = f"{tutorial} cell {i}"
            if gqa and cell.gqa == "skip":
                continue
            if gqa and cell.gqa == "raises":
                with pytest.raises(IndexError, match="grouped-query attention, where each key/value head serves 2"):
                    run_cell(cell, ours, i)
                continue
            out = run_cell(cell, ours, i)
            out_tl = run_cell(cell, theirs, i)
            if not cell.compare:
                continue
            assert_close(comparable(out), comparable(out_tl), f"{where} (output)")
            for name in dict.fromkeys(assigned_names(cell.code)):
                a, b = comparable(ours.get(name)), comparable(theirs.get(name))
                if a is not None or b is not None:
                    assert_close(a, b, f"{where}: {name}")
    finally:
        model.reset_hooks(including_permanent=True)


# ------------------------------------------------------------------------------------------- the idiom count
# Every distinct model / cache / hook idiom the four tutorials use, each run on our model and on TL's bridge over
# the same weights (tests/interp/test_tl_idioms.py checks ~35 more of the API's corners).
TEXT = "After J and M went to the store, M gave a drink to "


def _cache(model, **kw):
    return model.run_with_cache(TEXT, **kw)[1]


def _hook_values(model, name, make):
    seen = []
    model.run_with_hooks(TEXT, return_type=None, fwd_hooks=[(name, lambda t, hook: seen.append(make(t, hook)))])
    return seen


def _kept_hook(model, level):
    """add_hook, then run_with_cache: is the hook still there afterwards? (TL: not with level=1)"""
    model.add_hook("blocks.0.attn.hook_z", lambda z, hook: z * 0, level=level)
    ablated, _ = model.run_with_cache(TEXT)
    after = model(TEXT)
    model.reset_hooks()
    return [ablated, after]


def _permanent(model):
    model.add_hook(lambda name: name.endswith("z"), lambda z, hook: z * 0.5, is_permanent=True)
    model.reset_hooks()
    kept = model(TEXT)
    model.reset_hooks(including_permanent=True)
    return [kept, model(TEXT)]


def _by_attribute(model):
    model.blocks[1].attn.hook_z.add_hook(lambda z, hook: z * 0)
    out = model.run_with_cache(TEXT)[0]
    model.reset_hooks()
    return out


def _metric(logits):
    return logits[:, -1, 74] - logits[:, -1, 77]


def _tl_patching(model, fn):
    from transformer_lens import patching

    clean, corrupted = model.to_tokens([TEXT]), model.to_tokens([TEXT.replace("M gave", "J gave")])
    return getattr(patching, fn)(model, corrupted, model.run_with_cache(clean)[1], _metric)


def _dla(model, method, **kw):
    cache = _cache(model)
    return cache.apply_ln_to_stack(getattr(cache, method)(layer=-1, pos_slice=-1, **kw), layer=-1, pos_slice=-1)


def _test_prompt(model):
    from transformer_lens import utils

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        utils.test_prompt(TEXT, "M", model, prepend_bos=True, prepend_space_to_answer=False)
    return out.getvalue()


def _act(*args):
    from transformer_lens import utils

    return utils.get_act_name(*args)


IDIOMS = {
    "model(text, return_type='loss')": lambda m: m(TEXT, return_type="loss"),
    "model(text, prepend_bos=False)": lambda m: m(TEXT, prepend_bos=False),
    "to_tokens(text)": lambda m: m.to_tokens(TEXT),
    "to_tokens(list) (padded)": lambda m: m.to_tokens(["The cat sat.", "The cat sat on the mat."]),
    "to_str_tokens(text)": lambda m: m.to_str_tokens(TEXT),
    "to_str_tokens([1, pos] tokens)": lambda m: m.to_str_tokens(m.to_tokens(TEXT)),
    "to_single_token": lambda m: m.to_single_token("M"),
    "to_string(int)": lambda m: m.to_string(256),
    "to_string(tokens)": lambda m: m.to_string(m.to_tokens(TEXT)[0]),
    "get_token_position(mode='last')": lambda m: m.get_token_position("M", TEXT, mode="last"),
    "loss_fn(per_token=True)": lambda m: m.loss_fn(m(TEXT), m.to_tokens(TEXT), per_token=True),
    "cfg.n_layers / n_heads / d_head / d_model / d_vocab": lambda m: [
        m.cfg.n_layers,
        m.cfg.n_heads,
        m.cfg.d_head,
        m.cfg.d_model,
        m.cfg.d_vocab,
    ],
    "cfg.device": lambda m: str(m.cfg.device),
    "utils.test_prompt": _test_prompt,
    "run_with_cache(remove_batch_dim=True)": lambda m: _cache(m, remove_batch_dim=True)["pattern", 0, "attn"],
    "run_with_cache(stop_at_layer=, names_filter=[...])": lambda m: m.run_with_cache(
        TEXT, stop_at_layer=1, names_filter=["blocks.0.attn.hook_pattern"]
    )[1]["blocks.0.attn.hook_pattern"],
    "run_with_cache(names_filter=lambda, return_type=None)": lambda m: _cache(
        m, names_filter=lambda name: name.endswith("z"), return_type=None
    )["z", 1],
    "cache['resid_post', -1]": lambda m: _cache(m)["resid_post", -1],
    "cache['ln_final.hook_scale']": lambda m: _cache(m)["ln_final.hook_scale"],
    "cache[get_act_name('scale', l, 'ln1')]": lambda m: _cache(m)[_act("scale", 1, "ln1")],
    "cache.apply_ln_to_stack(resid)": lambda m: _cache(m).apply_ln_to_stack(
        _cache(m)["resid_post", -1][:, -1], layer=-1, pos_slice=-1
    ),
    "cache.accumulated_resid(incl_mid=True)": lambda m: _dla(m, "accumulated_resid", incl_mid=True),
    "cache.decompose_resid": lambda m: _dla(m, "decompose_resid"),
    "cache.stack_head_results": lambda m: _dla(m, "stack_head_results"),
    "cache['result', l] (set_use_attn_result)": lambda m: [m.set_use_attn_result(True), _cache(m)["result", 1]][1],
    "run_with_hooks(return_type='loss', get_act_name('v', l))": lambda m: m.run_with_hooks(
        TEXT, return_type="loss", fwd_hooks=[(_act("v", 0), lambda v, hook: v * 0)]
    ),
    "get_act_name('in', l) (TL 3 alias of resid_pre)": lambda m: _hook_values(m, _act("in", 1), lambda t, h: t),
    "hook.layer() with a names filter": lambda m: _hook_values(
        m, lambda name: name.endswith("pattern"), lambda t, h: h.layer()
    ),
    "hook.name": lambda m: _hook_values(m, _act("z", 1), lambda t, h: h.name),
    "hook_dict[name].name": lambda m: m.hook_dict["blocks.1.attn.hook_z"].name,
    "blocks[l].attn.hook_z.add_hook": _by_attribute,
    "add_hook(level=1) comes off with run_with_cache": lambda m: _kept_hook(m, 1),
    "add_hook stays through run_with_cache": lambda m: _kept_hook(m, None),
    "add_hook(is_permanent=True) / reset_hooks(including_permanent=True)": _permanent,
    "tl_named_parameters": lambda m: [(n, p) for n, p in m.tl_named_parameters()],
    "W_E / W_U / b_U": lambda m: [m.W_E, m.W_U, m.b_U],
    "embed.W_E / unembed.W_U / unembed.b_U": lambda m: [m.embed.W_E, m.unembed.W_U, m.unembed.b_U],
    "W_Q / W_K / W_V / W_O": lambda m: [m.W_Q, m.W_K, m.W_V, m.W_O],
    "blocks[l].attn.W_Q / W_V": lambda m: [m.blocks[1].attn.W_Q, m.blocks[1].attn.W_V],
    "OV.eigenvalues": lambda m: m.OV.eigenvalues,
    "QK[l, h].AB": lambda m: m.QK[1, 2].AB,
    "embed.W_E @ OV @ unembed.W_U (eigenvalues)": lambda m: (m.embed.W_E @ m.OV @ m.unembed.W_U).eigenvalues,
    "unembed(ln_final(resid))": lambda m: m.unembed(m.ln_final(_cache(m)["resid_post", -1])),
    "embed(tokens); blocks[0].mlp(blocks[0].ln2(x))": lambda m: m.blocks[0].mlp(
        m.blocks[0].ln2(m.embed(m.to_tokens(TEXT)))
    ),
    "generate(do_sample=False)": lambda m: m.generate(TEXT, max_new_tokens=5, do_sample=False, verbose=False),
    "patching.get_act_patch_resid_pre": lambda m: _tl_patching(m, "get_act_patch_resid_pre"),
    "patching.get_act_patch_attn_head_all_pos_every": lambda m: _tl_patching(
        m, "get_act_patch_attn_head_all_pos_every"
    ),
    "patching.get_act_patch_block_every": lambda m: _tl_patching(m, "get_act_patch_block_every"),
}


# Checked against TL's `HookedTransformer` (what ARENA uses): the bridge names hook_z's hook point by its own
# module ("blocks.1.attn.o.hook_in") and its `add_hook` has no `level`.
CLASSIC = {
    "hook.name",
    "hook_dict[name].name",
    "add_hook(level=1) comes off with run_with_cache",
    "add_hook stays through run_with_cache",
}


@pytest.fixture(scope="module")
def gqa_models():
    model = wrap("llama")  # 2 kv heads for 4 query heads: the hardest case for these idioms
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model, model.to_transformer_bridge(), model.to_transformer_lens()


def test_every_tutorial_idiom_gives_what_transformer_lens_gives(gqa_models):
    model, bridge, classic = gqa_models
    failed = {}
    for name, idiom in IDIOMS.items():
        tl = classic if name in CLASSIC else bridge
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert_close(comparable(idiom(model)), comparable(idiom(tl)), name)
        except Exception as e:  # noqa: BLE001 - collected and reported below
            failed[name] = f"{type(e).__name__}: {e}"
        finally:
            for m in (model, bridge, classic):
                m.reset_hooks(including_permanent=True)
                m.set_use_attn_result(False)
    print(f"\n{len(IDIOMS) - len(failed)} of {len(IDIOMS)} tutorial idioms agree with TransformerLens")
    assert len(IDIOMS) >= 47 and not failed, "\n".join(f"{k}: {v[:300]}" for k, v in failed.items())
