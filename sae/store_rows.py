"""Which rows of an `ActivationStore` an SAE reads: the hook, its row shape, and the train / held-out shard split.

Shared by training (`sae.train`), evaluation (`sae.evaluate`) and the dashboards, so the three agree on the
held-out rows every metric is computed on.
"""

from __future__ import annotations

from interp.store import ActivationStore


def store_hook(store: ActivationStore, hook: str | None) -> str:
    """The hook an SAE reads: the store's only one, or `hook` after checking the store has it."""
    hooks = list(store.hooks)
    if hook is None:
        if len(hooks) != 1:
            raise ValueError(f"the store has hooks {hooks}: pick one with --hook")
        return hooks[0]
    if hook not in store.hooks:
        raise ValueError(f"hook {hook!r} is not in the store; it has {hooks}")
    return hook


def check_shapes(store: ActivationStore, hook: str, d_in: int | None = None) -> int:
    """d_in of the hook's rows (vectors only), checked against the SAE's `d_in` when given."""
    shape = store.hooks[hook]
    if len(shape) != 1:
        raise ValueError(f"hook {hook!r} has rows of shape {list(shape)}; an SAE needs vectors (e.g. a resid hook)")
    if d_in is not None and shape[0] != d_in:
        raise ValueError(
            f"the store's {hook} rows have d_model {shape[0]} but the SAE expects d_in {d_in}: "
            "use a store of the model/hook the SAE was trained on"
        )
    return shape[0]


def split_shards(store: ActivationStore, holdout: int) -> tuple[list[int], list[int]]:
    """(training shards, held-out shards): the last `holdout` committed shards are held out."""
    order = store.shard_indices
    if holdout >= len(order):
        raise ValueError(f"holdout_shards={holdout} leaves nothing to train on: the store has {len(order)} shards")
    return order[: len(order) - holdout], order[len(order) - holdout :]
