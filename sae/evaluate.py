"""Score an SAE on store rows the one way: same rows, same special-row rule, same inference codes.

Used by `interp sae eval`, by `train_sae`'s final report and by the SAE dashboard header, so the three
give the same FVU and L0 for the same SAE (tested). The rows are the split's rows (held-out shards when
training kept some) minus the special rows of the `interp.cache.rows` rule the SAE was trained with (recorded
in its `train_config.json`, key `rows`) unless another rule is asked for; the codes are the inference
codes (`sae.inference`: BatchTopK family as JumpReLU) unless `codes="batch"` asks for batch-level top-k.

    >>> res = evaluate_store(load_sae(d), store, d)        # {"fvu":..., "l0":..., "rows":..., "row_rule": {...}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.cache.rows import RowFilter, row_filter

CODES = ("threshold", "batch")
"""threshold: inference codes as shipped (a row's code depends only on the row); batch: the training
object's batch-level top-k over chunks of `chunk` rows (explicit, for comparison)."""


def recorded_rows(sae_dir: str | Path | None) -> dict[str, Any] | None:
    """The row-rule config the SAE's training run recorded (None when there is none)."""
    if sae_dir is None:
        return None
    f = Path(sae_dir) / "train_config.json"
    return json.loads(f.read_text()).get("rows") if f.is_file() else None


def sae_row_filter(sae_dir: str | Path | None, store: Any, hook: str, exclude: str | None = None) -> RowFilter:
    """The row filter to score an SAE with: `exclude` if given, else the rule its training recorded
    (with the same reference norm), else the toolkit default."""
    rec = recorded_rows(sae_dir)
    spec = exclude if exclude is not None else (rec or {}).get("exclude")
    return row_filter(spec, store, hook, rec)


def eval_rows(sae_dir: str | Path | None, store: Any, split: str = "auto") -> tuple[str, Tensor]:
    """(split used, global row indices) to score an SAE on: "heldout" = the shards its training run held
    out (`train_config.json`: holdout_shards), "all" = every row; "auto" = heldout when there are any."""
    from sae.store_rows import split_shards

    if split not in ("auto", "heldout", "all"):
        raise ValueError(f"--split must be auto, heldout or all, got {split!r}")
    cfg_file = Path(sae_dir) / "train_config.json" if sae_dir is not None else None
    holdout = json.loads(cfg_file.read_text()).get("holdout_shards", 0) if cfg_file and cfg_file.is_file() else 0
    if split == "heldout" and not holdout:
        raise ValueError(
            f"{sae_dir} was trained without held-out shards: train with --holdout-shards N, or use --split all"
        )
    if split == "all" or not holdout:
        return "all", torch.arange(len(store))
    report = Path(sae_dir) / "train_report.json"
    held = json.loads(report.read_text()).get("heldout_shards") if report.is_file() else None
    if held and all(store.has_shard(i) for i in held):  # the shards training held out, even if the store grew
        return "heldout", store.shard_rows(held)
    return "heldout", store.shard_rows(split_shards(store, holdout)[1])


def ruled_rows(store: Any, hook: str, filt: RowFilter, rows: Tensor | None = None, chunk: int = 1 << 16) -> Tensor:
    """Global indices of the rows (`rows`, default all) that the row rule keeps, read in chunks (the hook's
    activations only when the rule has a norm cut)."""
    rows = torch.arange(len(store)) if rows is None else rows
    hooks = [hook] if filt.cut is not None else []
    kept = [part[filt.keep(store.get_rows(part, hooks=hooks))] for part in rows.split(chunk)]
    return torch.cat(kept) if kept else rows[:0]


def kept_rows(store: Any, hook: str, rows: Tensor, filt: RowFilter, max_rows: int) -> dict[str, Tensor]:
    """The first `max_rows` ordinary rows among `rows` (index columns included)."""
    got = store.get_rows(rows[: max_rows + max_rows // 4 + 256], hooks=hook)
    keep = filt.keep(got)
    if bool(keep.all()):  # nothing excluded: slices are views, no copy
        out = {k: v[:max_rows] for k, v in got.items()}
    else:
        out = {k: v[keep][:max_rows] for k, v in got.items()}
    if len(out[hook]) < max_rows and len(rows) > len(keep):  # many rows dropped: read everything
        got = store.get_rows(rows, hooks=hook)
        keep = filt.keep(got)
        out = {k: v[keep][:max_rows] for k, v in got.items()}
    out["n_read"] = torch.tensor(int(keep.numel()))
    out["n_excluded"] = torch.tensor(int((~keep).sum()))
    return out


@torch.no_grad()
def evaluate_rows(sae: Any, x: Tensor, codes: str = "threshold", chunk: int = 4096) -> dict[str, float]:
    """FVU, L0, dead/dense fractions of `sae` on rows `x` (already filtered), in chunks of `chunk`."""
    from sae import metrics as M
    from sae.inference import to_inference

    if codes not in CODES:
        raise ValueError(f"codes must be one of {CODES}, got {codes!r}")
    s = to_inference(sae) if codes == "threshold" else sae.eval()
    dev = next(s.parameters()).device  # rows go to the SAE's device a chunk at a time
    return M.reconstruction(s, (x[i : i + chunk].to(dev).float() for i in range(0, len(x), chunk)))


def sae_hook(sae: Any, store: Any, hook: str | None = None, allow_other_hook: bool = False) -> str:
    """The store hook to score `sae` on: `hook`, else the one its cfg records, else the store's only hook.

    The SAE's cfg records the model and hook it was trained on (`metadata.model_name`, `hook_name`): a
    store of another model, or another hook (even of the same width, where the numbers would come out
    silently wrong: FVU > 1, most latents dead), is refused unless `allow_other_hook` (a deliberate
    transfer study) is set.
    """
    from sae.store_rows import store_hook as _hook

    meta = sae.cfg.metadata
    rec_hook, rec_model = getattr(meta, "hook_name", None), getattr(meta, "model_name", None)
    flag = "pass --allow-other-hook for a deliberate transfer study"
    model = getattr(store.meta, "model", None)
    if not allow_other_hook and rec_model and model and rec_model != model:
        raise ValueError(
            f"the SAE was trained on activations of {rec_model!r} but the store {store.path} holds "
            f"{model!r}: score it on a store of {rec_model!r} (or {flag})"
        )
    if hook is None and rec_hook in store.hooks:
        return rec_hook
    h = _hook(store, hook)
    if not allow_other_hook and rec_hook and h != rec_hook:
        where = "" if rec_hook in store.hooks else f" (the store {store.path} has no {rec_hook})"
        raise ValueError(f"the SAE was trained on {rec_hook!r}, not {h!r}{where}: score it on {rec_hook!r} (or {flag})")
    return h


def evaluate_store(
    sae: Any,
    store: Any,
    sae_dir: str | Path | None,
    hook: str | None = None,
    split: str = "auto",
    max_rows: int = 32_768,
    exclude: str | None = None,
    codes: str = "threshold",
    chunk: int = 4096,
    allow_other_hook: bool = False,
) -> dict[str, Any]:
    """`interp sae eval`'s numbers: which rows, which rule, which codes, and the metrics."""
    from sae.store_rows import check_shapes as _check_shapes

    if max_rows < 1:
        raise ValueError(f"--max-rows must be >= 1, got {max_rows}")
    if codes not in ("threshold", "batch"):
        raise ValueError(f"--codes must be threshold or batch, got {codes!r}")
    h = sae_hook(sae, store, hook, allow_other_hook)
    _check_shapes(store, h, sae.cfg.d_in)
    used, rows = eval_rows(sae_dir, store, split)
    filt = sae_row_filter(sae_dir, store, h, exclude)
    got = kept_rows(store, h, rows, filt, max_rows)
    x = got[h].float()
    if not len(x) or not bool(torch.isfinite(x).all()):
        raise ValueError(
            f"no finite ordinary rows of {h} to score in the {used} split ({int(got['n_excluded'])} "
            f"excluded by {filt.spec}): check the store (`interp inspect --verify`) or use --split all"
        )
    res = evaluate_rows(sae, x, codes, chunk)
    return {
        "hook": h,
        "split": used,
        "codes": codes,
        "row_rule": filt.config(),
        "rows_excluded": int(got["n_excluded"]),
        **res,
    }
