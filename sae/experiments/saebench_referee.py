"""SAEBench's own core evaluation as referee for `interp sae eval`: same SAE, same token sequences, same rows.

SAEBench (sae-bench 0.6.0) is not a dependency of the project (it declares torchvision, numpy<2, openai,
sae-probes): install it beside the environment, `pip install --target DIR --no-deps sae-bench`, plus the one
pure-Python module its core eval imports that the project lacks, `pip install --target DEPS --no-deps tabulate`,
and point `SAE_BENCH_DIR` at DIR (DEPS may be DIR itself, or listed in `SAE_BENCH_DEPS`).

What runs on SAEBench's side is its own code, unchanged: `sae_bench.sae_bench_utils.general_utils.
load_and_format_sae` (its decoder-norm check and cfg standardisation), then `sae_bench.evals.core.main.run_evals`
with a `CoreEvalConfig` asking for every metric group, `get_featurewise_weight_based_metrics` and
`calculate_misc_metrics`: exactly what its `multiple_evals` does for one SAE, minus the two hub downloads it
makes there (the model by name, the text data set by name). In their place: the model is our wrapped model as
a TransformerLens `HookedTransformer` (`interp.views.transformer_lens.to_transformer_lens`, same weights, no
folding), and the tokens come through sae-lens's own `ActivationsStore` over a pre-tokenised `datasets.Dataset`
of the store's held-out sequences, in order (no shuffle), `prepend_bos=False` (the store's tokens as cached).

What runs on ours: `interp sae eval --exclude none --max-rows N` (`sae.evaluate.evaluate_store` on the store's
rows) and the spliced-loss metrics (`sae.metrics.spliced_loss`) on the same sequences.

Rows: SAEBench masks special rows by *token id* (`ignore_tokens`: pad/eos/bos ids in `multiple_evals`); the
toolkit's rule (`positions:0+norm-outliers:10`) is by position and norm, which a token-id mask cannot express
(SmolLM2's cached sequences start with an ordinary text token). The referee therefore runs both with no
exclusion (`ignore_tokens=set()`, `--exclude none`): every row of the N sequences, on both sides.

    SAE_BENCH_DIR=/work/sae_bench_pkgs SAE_BENCH_DEPS=/work/sae_bench_deps \\
      python -m sae.experiments.saebench_referee --sae RUN/ours_topk --store STORE --model smollm2-135m --n-seqs 32

Prints one JSON object: per metric, ours, SAEBench's, |difference|, and whether the two are defined the same
(then they must agree to 1e-3) or, if not, why (`DIFFERENT`).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from typing import Any

import torch
from torch import Tensor

TOL = 1e-3
"""Agreement asked of every metric defined the same on both sides."""

DIFFERENT = {
    "explained_variance": "SAEBench 0.6.0's total variance is E||x||^2 - (mean_j E[x_j^2])^2 (its "
    "`mean_act_per_dimension` holds squares, not means), not the centred variance sum_j Var(x_j) our FVU "
    "divides by; `saebench_formula_on_our_rows` recomputes SAEBench's formula from our rows",
    "mse": "SAEBench's `mse` is the per-row squared error summed over d_in divided by the number of rows in "
    "its batch, then averaged over rows (= mean row error / batch rows); ours is the mean row error",
    "explained_variance_legacy": "SAEBench's legacy score averages 1 - rss_row / ||x_row - batch mean||^2 "
    "over rows; not a quantity of ours",
    "relative_reconstruction_bias": "SAEBench averages the per-batch ratio E[xh.xh]/E[xh.x] over its batches "
    "of prompts; ours is one ratio over all rows (equal with a single batch)",
}
"""Metrics whose definitions differ, and exactly how."""


def add_saebench_path(root: str | None = None, deps: str | None = None) -> str | None:
    """Put sae-bench (and its extra pure-Python deps) on sys.path; None if its core eval imports, else why not."""
    root = root or os.environ.get("SAE_BENCH_DIR")
    if not root:
        return "SAE_BENCH_DIR is not set (pip install --target DIR --no-deps sae-bench)"
    for p in (root, deps or os.environ.get("SAE_BENCH_DEPS")):
        if p and p not in sys.path:
            sys.path.append(p)  # after the project's own paths: nothing of ours is shadowed
    try:
        import sae_bench.evals.core.main  # noqa: F401
    except Exception as exc:  # its heavy deps may be missing: say which
        return f"sae_bench.evals.core.main does not import: {type(exc).__name__}: {exc}"
    return None


def emit_json(res: dict[str, Any], out: str | None) -> None:
    """Print `res` as JSON, and write it to `out` too when given (the referee scripts' output)."""
    text = json.dumps(res, indent=1, default=str)
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            f.write(text + "\n")
    print(text)


def saebench_core(
    sae: Any,
    tl_model: Any,
    seqs: Tensor,
    batch_prompts: int = 8,
    ignore_tokens: set[int] | None = None,
    device: str = "cpu",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """SAEBench's core metrics (its `run_evals`, every group on) of `sae` on `seqs` [n, ctx] through `tl_model`."""
    from datasets import Dataset
    from sae_bench.evals.core import main as core
    from sae_bench.evals.core.eval_config import CoreEvalConfig
    from sae_bench.sae_bench_utils import general_utils
    from sae_lens.training.activations_store import ActivationsStore

    if len(seqs) % batch_prompts:
        raise ValueError(f"{len(seqs)} sequences are not a whole number of batches of {batch_prompts}")
    _, s, _ = general_utils.load_and_format_sae("local", copy.deepcopy(sae), device)
    n, ctx = seqs.shape
    store = ActivationsStore(
        model=tl_model,
        dataset=Dataset.from_dict({"input_ids": seqs.tolist()}),
        streaming=False,
        hook_name=s.cfg.hook_name,
        hook_head_index=None,
        context_size=ctx,
        d_in=s.cfg.d_in,
        n_batches_in_buffer=1,
        total_training_tokens=n,
        store_batch_size_prompts=batch_prompts,
        train_batch_size_tokens=n * ctx,
        prepend_bos=False,
        normalize_activations="none",
        device=torch.device(device),
        dtype="float32",
    )
    n_batches = n // batch_prompts
    cfg = CoreEvalConfig(
        batch_size_prompts=batch_prompts,
        n_eval_reconstruction_batches=n_batches,
        n_eval_sparsity_variance_batches=n_batches,
        context_size=ctx,
        compute_kl=True,
        compute_ce_loss=True,
        compute_l2_norms=True,
        compute_sparsity_metrics=True,
        compute_variance_metrics=True,
        compute_featurewise_density_statistics=True,
        compute_featurewise_weight_based_metrics=True,
        exclude_special_tokens_from_reconstruction=bool(ignore_tokens),
    )
    with torch.no_grad():
        metrics, feats = core.run_evals(s, store, tl_model, cfg, ignore_tokens=set(ignore_tokens or ()))
    metrics["misc_metrics"] = core.calculate_misc_metrics(feats)
    return metrics, feats


def saebench_ev_formula(x: Tensor, xh: Tensor, batch_rows: int) -> float:
    """SAEBench 0.6.0's explained variance, its formula applied to rows `x` and reconstructions `xh`."""
    ss, sq, res = [], [], []
    for i in range(0, len(x), batch_rows):
        a, b = x[i : i + batch_rows].double(), xh[i : i + batch_rows].double()
        ss.append(a.pow(2).sum(-1).mean())
        sq.append(a.pow(2).mean(0))
        res.append((a - b).pow(2).sum(-1).mean())
    total = torch.stack(ss).mean() - torch.cat(sq).mean() ** 2
    return float(1 - torch.stack(res).mean() / total)


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per metric: ours, SAEBench's, |diff|, same definition?, agrees (to TOL) or why not."""
    t = {k2: v2 for grp in theirs.values() if isinstance(grp, dict) for k2, v2 in grp.items()}
    pairs = [  # (name, ours, SAEBench's)
        ("l0", ours["l0"], t["l0"]),
        ("l1", ours["l1"], t["l1"]),
        ("cossim", ours["cossim"], t["cossim"]),
        ("l2_norm_in", ours["l2_norm_in"], t["l2_norm_in"]),
        ("l2_norm_out", ours["l2_norm_out"], t["l2_norm_out"]),
        ("l2_ratio", ours["l2_ratio"], t["l2_ratio"]),
        ("frac_alive (1 - dead_frac)", 1 - ours["dead_frac"], t["frac_alive"]),
        ("dense_frac (freq_over_10_percent)", ours["dense_frac"], t["freq_over_10_percent"]),
        ("freq_over_1_percent", ours["freq_over_1_percent"], t["freq_over_1_percent"]),
        ("normalized_freq_over_1_percent", ours["normalized_freq_over_1_percent"], t["normalized_freq_over_1_percent"]),
        (
            "normalized_freq_over_10_percent",
            ours["normalized_freq_over_10_percent"],
            t["normalized_freq_over_10_percent"],
        ),
        ("ce_loss_without_sae", ours["ce_clean"], t["ce_loss_without_sae"]),
        ("ce_loss_with_sae", ours["ce_sae"], t["ce_loss_with_sae"]),
        ("ce_loss_with_ablation", ours["ce_zero"], t["ce_loss_with_ablation"]),
        ("ce_loss_score (ce_recovered)", ours["ce_recovered"], t["ce_loss_score"]),
        ("kl_div_with_sae", ours["kl"], t["kl_div_with_sae"]),
        ("kl_div_with_ablation", ours["kl_zero"], t["kl_div_with_ablation"]),
        ("kl_div_score", ours["kl_score"], t["kl_div_score"]),
        ("average_max_encoder_cosine_sim", ours["average_max_encoder_cosine_sim"], t["average_max_encoder_cosine_sim"]),
        ("average_max_decoder_cosine_sim", ours["average_max_decoder_cosine_sim"], t["average_max_decoder_cosine_sim"]),
        (
            "explained_variance: SAEBench's formula on our rows",
            ours["saebench_formula_on_our_rows"],
            t["explained_variance"],
        ),
        ("explained_variance (ours: 1 - FVU)", 1 - ours["fvu"], t["explained_variance"]),
        ("mse (ours: per row, summed over d_in)", ours["mse"], t["mse"]),
        ("relative_reconstruction_bias", ours["relative_reconstruction_bias"], t["relative_reconstruction_bias"]),
    ]
    out = []
    for name, a, b in pairs:
        key = name.split(" ")[0].rstrip(":")
        why = None if "SAEBench's formula" in name else DIFFERENT.get(key)
        diff = abs(float(a) - float(b))
        row = {"metric": name, "ours": float(a), "saebench": float(b), "abs_diff": diff, "same_definition": why is None}
        row.update({"agrees": diff <= TOL} if why is None else {"why_not": why})
        out.append(row)
    return out


def ours_core(model: Any, sae: Any, hook: str, seqs: Tensor, x: Tensor, batch_rows: int) -> dict[str, Any]:
    """`interp sae eval`'s numbers on rows `x` (with no exclusion) and spliced metrics on `seqs`."""
    from interp.cache.rows import RowRule
    from sae import metrics as M
    from sae.evaluate import evaluate_rows
    from sae.saebench import _max_cos

    res = evaluate_rows(sae, x)
    none = RowRule.parse("none").bind_tensor(x, None)
    res.update(M.spliced_loss(model, sae, hook, seqs, rows=none))
    with torch.no_grad():
        xh = torch.cat([sae.decode(sae.encode(x[i : i + 4096])) for i in range(0, len(x), 4096)])
    res["saebench_formula_on_our_rows"] = saebench_ev_formula(x, xh, batch_rows)
    res["average_max_encoder_cosine_sim"] = _max_cos(sae.W_enc.T)
    res["average_max_decoder_cosine_sim"] = _max_cos(sae.W_dec)
    return res


def referee(
    model: Any, sae: Any, hook: str, seqs: Tensor, x: Tensor, batch_prompts: int = 8, ours: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Both sides on the same SAE and sequences (`x`: our rows of `seqs`, in order); `ours` if already computed."""
    from interp.views.transformer_lens import to_transformer_lens
    from sae.inference import to_inference

    sae = to_inference(sae)  # both sides score the shipped codes
    ctx = seqs.shape[1]
    ours = ours_core(model, sae, hook, seqs, x, batch_prompts * ctx) if ours is None else ours
    tl = to_transformer_lens(model)
    theirs, _ = saebench_core(sae, tl, seqs, batch_prompts)
    rows = compare(ours, theirs)
    same = [r for r in rows if r["same_definition"]]
    return {
        "rows_scored": len(x),
        "sequences": len(seqs),
        "ctx_len": ctx,
        "batch_prompts": batch_prompts,
        "all_same_definition_agree": all(r["agrees"] for r in same),
        "max_abs_diff_same_definition": max(r["abs_diff"] for r in same),
        "comparison": rows,
        "saebench_metrics": theirs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sae", required=True, help="our SAE folder (scored as shipped: `load_sae`'s inference codes)")
    ap.add_argument("--store", required=True)
    ap.add_argument("--model", required=True, help="the store's model spec")
    ap.add_argument("--n-seqs", type=int, default=32)
    ap.add_argument("--batch-prompts", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="also write the JSON here")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    why = add_saebench_path()
    if why:
        raise SystemExit(f"cannot run SAEBench's code: {why}")
    import interp
    from interp.store import ActivationStore
    from sae import load_sae
    from sae.cli import _store_sequences
    from sae.evaluate import eval_rows, evaluate_store

    st = ActivationStore.open(a.store)
    sae = load_sae(a.sae)
    model = interp.load_model(a.model)
    split, rows = eval_rows(a.sae, st)
    seqs = _store_sequences(st, a.n_seqs, rows)
    ctx = seqs.shape[1]
    n = len(seqs) * ctx
    ev = evaluate_store(sae, st, a.sae, max_rows=n, exclude="none")  # = interp sae eval --exclude none --max-rows n
    got = st.get_rows(rows[:n], hooks=ev["hook"])
    order = torch.argsort(got["seq"] * ctx + got["pos"])
    if not torch.equal(got["tokens"][order].long().reshape(-1, ctx), seqs):
        raise RuntimeError("the store rows and the rebuilt sequences differ: cannot compare on the same rows")
    x = got[ev["hook"]][order].float()
    ours = ours_core(model, sae, ev["hook"], seqs, x, a.batch_prompts * ctx)
    if abs(ours["fvu"] - ev["fvu"]) > 1e-6 or abs(ours["l0"] - ev["l0"]) > 1e-6:
        raise RuntimeError(f"`sae eval` rows differ from the referee's: {ev['fvu']} vs {ours['fvu']}")
    res = {
        "sae": a.sae,
        "store": a.store,
        "model": a.model,
        "split": split,
        "hook": ev["hook"],
        "sae_eval": {k: ev[k] for k in ("fvu", "l0", "dead_frac", "dense_frac", "rows", "row_rule")},
        **referee(model, sae, ev["hook"], seqs, x, a.batch_prompts, ours=ours),
    }
    emit_json(res, a.out)


if __name__ == "__main__":
    main()
