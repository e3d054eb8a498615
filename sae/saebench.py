"""Evaluation results in SAEBench's output format (`interp sae eval --suite saebench`).

SAEBench (Karvonen et al., 2025) writes one JSON per (SAE, eval type) with the fields `eval_type_id`,
`eval_config`, `eval_id`, `datetime_epoch_millis`, `eval_result_metrics`, `eval_result_details`,
`eval_result_unstructured`, `sae_bench_commit_hash`, `sae_lens_id`, `sae_lens_release_id`,
`sae_lens_version` and `sae_cfg_dict`. We write the same schema for three evals, computed by this
toolkit without downloads:

- `absorption_first_letter`: the first-letter task on single-token vocabulary words after a fixed
  prefix (SAEBench builds its word list the same way from the vocabulary); per letter a logistic probe on
  the model's activations, the k=1 sparse-probing latent as the letter's main latent, and the *full
  absorption* rate: of the words the probe gets right, the fraction where the main latent is silent while
  another active latent's decoder points along the probe. Differences to SAEBench: our probes use
  balanced one-vs-rest sets, the absorbing latent needs cos > 0.025 with the probe (SAEBench also asks
  its projection to carry a minimum share of the probe direction), and feature splitting counts the
  latents k-sparse probing adds while each raises F1 by > 0.03 (SAEBench: by > 0.03 with k up to 5).
- `sparse_probing`: SAEBench's eight downloaded text-classification sets are replaced (no network here)
  by token-level tasks made from the store's rows (`sae.sparse_probing`: SAEBench's protocol, k = 1, 2, 5;
  the metrics are their means) and by the first-letter classes of the same words (in the details);
  `sae_top_{1,2}_test_accuracy` are our k-sparse probes' accuracies, `llm_test_accuracy` the full
  probe's, on balanced test sets; the k=1 F1 is in `eval_result_unstructured`.
- `core`: SAEBench's metric groups (explained variance, MSE per element, cosine, L0/L1, shrinkage, CE
  and KL scores with zero ablation, density shares, alive fraction, encoder/decoder max cosines) on the
  rows `sae eval` scored, with the row rule. Dead = never fired on those rows (`frac_alive` = 1 - dead);
  `explained_variance_legacy` is written equal to `explained_variance` (not computed separately).

Every file validates against SAEBench's own JSON schemas (`tests/sae/test_saebench_schema.py`, which
reads them from an installed sae-bench: set `SAE_BENCH_DIR` to the folder holding its `sae_bench`
package, e.g. after `pip install --target DIR --no-deps sae-bench`; skipped when unset).
`sae_bench_commit_hash` is "not-sae-bench": these files are SAEBench-shaped, not produced by SAEBench.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

SUITE = ("absorption_first_letter", "sparse_probing", "core")
"""The eval types `--suite saebench` writes."""


def _envelope(
    eval_type: str,
    config: dict[str, Any],
    metrics: dict[str, Any],
    details: list[dict[str, Any]],
    sae_id: str,
    sae_cfg: dict[str, Any] | None,
    unstructured: Any = None,
) -> dict[str, Any]:
    import sae_lens

    return {
        "eval_type_id": eval_type,
        "eval_config": config,
        "eval_id": str(uuid.uuid4()),
        "datetime_epoch_millis": int(time.time() * 1000),
        "eval_result_metrics": metrics,
        "eval_result_details": details,
        "eval_result_unstructured": unstructured,
        "sae_bench_commit_hash": "not-sae-bench",
        "sae_lens_id": sae_id,
        "sae_lens_release_id": "local",
        "sae_lens_version": getattr(sae_lens, "__version__", "unknown"),
        "sae_cfg_dict": sae_cfg or {},
    }


def _std(v: list[float]) -> float:
    m = sum(v) / len(v)
    return (sum((a - m) ** 2 for a in v) / max(len(v) - 1, 1)) ** 0.5


def _max_cos(W: Any) -> float:
    """Mean over latents of the largest cosine with another latent (SAEBench's average_max_*_cosine_sim)."""
    import torch

    with torch.no_grad():
        U = W / W.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        out = []
        for i in range(0, len(U), 2048):
            c = U[i : i + 2048] @ U.T
            c[torch.arange(len(c)), torch.arange(i, i + len(c))] = -1.0
            out.append(c.max(1).values)
        return float(torch.cat(out).mean())


def saebench_records(
    fl: dict[str, Any],
    core: dict[str, Any],
    sae_id: str,
    hook: str,
    model: str,
    sae_cfg: dict[str, Any] | None = None,
    sae: Any = None,
    tasks: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """The three SAEBench-format records from `metrics.first_letter_absorption`'s output (`fl`) and the
    core metrics (`core`: `sae eval`'s output with the spliced-loss keys). Every field SAEBench's schemas
    require is present; our extra fields go to `eval_result_unstructured` or to the config's extra keys.
    `sae` (the SAE scored) gives the weight-based cosine statistics (0 without it). `tasks`
    (`sae.sparse_probing.sparse_probing` per store task) adds the store's token tasks to sparse probing:
    then its metrics are their means (SAEBench's protocol, k = 1, 2, 5), the first-letter rows stay in the
    details."""
    letters = fl["letters"]
    cfg = {
        "model_name": model,
        "random_seed": 0,
        "f1_jump_threshold": 0.03,
        "max_k_value": 3,
        "prompt_template": "The word is {word}",
        "prompt_token_pos": -1,
        "llm_dtype": "float32",
        "implementation": "sae.metrics.first_letter_absorption",
        "hook_name": hook,
        "absorbing_latent_min_cosine": 0.025,
    }
    fractions = [v["absorption_fraction"] for v in letters.values()]
    rates = [v["full_absorption_rate"] for v in letters.values()]
    splits = [float(v["n_split"]) for v in letters.values()]
    absorption = _envelope(
        "absorption_first_letter",
        cfg,
        {
            "mean": {
                "mean_absorption_fraction_score": fl["mean_absorption_fraction"],
                "mean_full_absorption_score": fl["mean_full_absorption"],
                "mean_num_split_features": fl["mean_num_split"],
                "std_dev_absorption_fraction_score": _std(fractions),
                "std_dev_full_absorption_score": _std(rates),
                "std_dev_num_split_features": _std(splits),
            }
        },
        [
            {
                "first_letter": L,
                "mean_absorption_fraction": v["absorption_fraction"],
                "full_absorption_rate": v["full_absorption_rate"],
                "num_full_absorption": int(v["n_saebench_full_absorption"]),
                "num_probe_true_positives": int(v.get("n_probe_true_positives", 0)),
                "num_split_features": int(v["n_split"]),
            }
            for L, v in sorted(letters.items())
        ],
        sae_id,
        sae_cfg,
        {
            "note": "absorption fraction and full absorption by SAEBench's rules (sae.metrics.saebench_absorption); "
            "absorption_simple is our simpler rate (main latent silent, another along the probe fires)",
            "absorption_simple": fl["mean_absorption"],
        },
    )
    acc = {L: v.get("accuracy_k", [v["f1_k1"]]) for L, v in letters.items()}
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    two = all(len(a) > 1 for a in acc.values())
    sae_m = {
        "sae_top_1_test_accuracy": mean([a[0] for a in acc.values()]),
        "sae_top_2_test_accuracy": mean([a[1] for a in acc.values()]) if two else None,
    }
    details = [
        {
            "dataset_name": f"first_letter_{L}",
            "llm_test_accuracy": v.get("probe_accuracy", float("nan")),
            "sae_top_1_test_accuracy": acc[L][0],
            "sae_top_2_test_accuracy": acc[L][1] if len(acc[L]) > 1 else None,
        }
        for L, v in sorted(letters.items())
    ]
    metrics: dict[str, Any] = {
        "llm": {"llm_test_accuracy": mean([v.get("probe_accuracy", float("nan")) for v in letters.values()])},
        "sae": sae_m,
    }
    names, ks, extra = ["first_letter (one-vs-rest tasks over the local vocabulary)"], [1, 2], {}
    if tasks:
        details += [{"dataset_name": f"store_tokens_{t}", **r["mean"]} for t, r in sorted(tasks.items())]
        keys = sorted({k for r in tasks.values() for k in r["mean"]})
        avg = {k: mean([r["mean"][k] for r in tasks.values()]) for k in keys}
        metrics = {
            "llm": {k: v for k, v in avg.items() if k.startswith("llm_")},
            "sae": {k: v for k, v in avg.items() if k.startswith("sae_")},
        }
        names = [*(f"store_tokens_{t}" for t in sorted(tasks)), names[0]]
        ks = [1, 2, 5]
        extra = {
            "metrics": "means over the store_tokens tasks (sae.sparse_probing: SAEBench's protocol on token classes "
            "of the store's rows); first_letter rows in the details",
            "store_token_task_rows": {t: r["rows"] for t, r in tasks.items()},
            "store_token_task_selection": {t: r.get("selection") for t, r in tasks.items()},
        }
    probing = _envelope(
        "sparse_probing",
        {
            "model_name": model,
            "random_seed": 0,
            "llm_dtype": "float32",
            "k_values": ks,
            "dataset_names": names,
            "hook_name": hook,
        },
        metrics,
        details,
        sae_id,
        sae_cfg,
        {"sae_top_1_test_f1": fl["mean_f1_k1"], **extra},
    )
    rows = int(core.get("rows", 0))
    core_rec = _envelope(
        "core",
        {
            "model_name": model,
            "llm_dtype": "float32",
            "compute_kl": "kl" in core,
            "compute_ce_loss": "ce_recovered" in core,
            "exclude_special_tokens_from_reconstruction": True,
            "hook_name": hook,
            "row_rule": core.get("row_rule"),
            "codes": core.get("codes"),
            "split": core.get("split"),
        },
        {
            "model_behavior_preservation": {
                "kl_div_score": core.get("kl_score"),
                "kl_div_with_ablation": core.get("kl_zero"),
                "kl_div_with_sae": core.get("kl"),
            },
            "model_performance_preservation": {
                "ce_loss_score": core.get("ce_recovered"),
                "ce_loss_with_ablation": core.get("ce_zero"),
                "ce_loss_with_sae": core.get("ce_sae"),
                "ce_loss_without_sae": core.get("ce_clean"),
            },
            "reconstruction_quality": {
                "explained_variance": 1 - core["fvu"],
                "explained_variance_legacy": 1 - core["fvu"],
                "mse": core["mse"] / (sae_cfg or {}).get("d_in", 1),
                "cossim": core.get("cossim"),
            },
            "shrinkage": {
                k: core.get(k) for k in ("l2_norm_in", "l2_norm_out", "l2_ratio", "relative_reconstruction_bias")
            },
            "sparsity": {"l0": core["l0"], "l1": core.get("l1")},
            "token_stats": {"total_tokens_eval_reconstruction": rows, "total_tokens_eval_sparsity_variance": rows},
            "misc_metrics": {
                **{
                    k: core.get(k)
                    for k in (
                        "freq_over_1_percent",
                        "freq_over_10_percent",
                        "normalized_freq_over_1_percent",
                        "normalized_freq_over_10_percent",
                    )
                },
                "average_max_encoder_cosine_sim": _max_cos(sae.W_enc.T) if sae is not None else 0.0,
                "average_max_decoder_cosine_sim": _max_cos(sae.W_dec) if sae is not None else 0.0,
                "frac_alive": 1 - core["dead_frac"],
            },
        },
        [],
        sae_id,
        sae_cfg,
        {
            "dead": f"never fired on the {rows} {core.get('split', '')} rows the row rule keeps",
            "frac_dead_latents": core.get("dead_frac"),
            "dense_frac": core.get("dense_frac"),
            "explained_variance_legacy": "not computed: equal to explained_variance here",
            "fvu": core["fvu"],
        },
    )
    return {"absorption_first_letter": absorption, "sparse_probing": probing, "core": core_rec}


FOLDER = "saebench"
"""Where `interp sae eval --suite saebench` writes, inside the SAE folder (SAEBench's own layout)."""

ELSEWHERE = "copy the SAE folder somewhere you can write and pass the copy as --sae"


def check_folder(sae_dir: str | Path) -> Path:
    """`<sae_dir>/saebench`, once it is sure the suite can write there and only there: not a symbolic link (the
    files would land outside the SAE folder), not a file, writable, no planted lock path. Writes nothing; run it
    before the suite (minutes) so a refusal comes first."""
    from interp.store.lock import check_lock_path

    sae_dir = Path(sae_dir)
    dest = sae_dir / FOLDER
    if dest.is_symlink():
        raise ValueError(
            f"{dest} is a symbolic link (to {os.readlink(dest)}): the saebench suite writes into the SAE folder "
            f"only; remove the link, or {ELSEWHERE}"
        )
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{dest} is a file; the saebench suite writes its files into a folder there: move the file")
    where = dest if dest.is_dir() else sae_dir
    if sae_dir.is_dir() and not os.access(where, os.W_OK | os.X_OK):
        raise ValueError(f"permission denied: the saebench suite cannot write into {where}; {ELSEWHERE}")
    check_lock_path(dest)
    return dest


def check_inputs(tokenizer: Any, model: str, words: int, store: Any = None) -> list[tuple[int, str]]:
    """The first-letter words (`metrics.first_letter_words`), once it is sure every eval of the suite has the
    inputs it needs: words of enough letters in the tokenizer's vocabulary, and token classes in the store that
    SAEBench's balanced probing sets can be drawn from. Reads only the vocabulary and the store's token ids."""
    from sae import metrics as M
    from sae import sparse_probing as SP

    found = M.first_letter_words(tokenizer, limit=words)
    if not found:
        raise ValueError(
            f"the saebench suite's first-letter tasks need vocabulary tokens that are a space and a lowercase "
            f"word (3+ letters), and the tokenizer of --model {model} has none (a byte-level tokenizer spells "
            "words letter by letter): use --suite core, or a --model with a word vocabulary"
        )
    if not M.first_letter_split(found)[0]:
        every = len(M.first_letter_words(tokenizer, limit=10**9))
        more = "raise --words" if every > len(found) else f"use --suite core (the vocabulary has {every} such words)"
        raise ValueError(
            f"--words {words} gives {len(found)} vocabulary words and no first letter has the "
            f"{M.FIRST_LETTER_MIN_WORDS} the first-letter task needs: {more}"
        )
    if store is not None:
        problem = SP.store_tasks_problem(store, lambda t: tokenizer.decode([t]))
        if problem:
            raise ValueError(f"{problem}; or use --suite core")
    return found


def write_saebench(
    folder: str | Path,
    fl: dict[str, Any],
    core: dict[str, Any],
    sae_id: str,
    hook: str,
    model: str,
    out: str | Path | None = None,
    sae: Any = None,
    tasks: dict[str, dict[str, Any]] | None = None,
) -> list[Path]:
    """Write `<out or folder/saebench>/<sae_id>_<eval_type>.json` for the three evals; returns the paths."""
    cfg_file = Path(folder) / "cfg.json"
    sae_cfg = json.loads(cfg_file.read_text()) if cfg_file.is_file() else None
    from interp.store.atomic import atomic_write_bytes

    dest = Path(out) if out is not None else Path(folder) / FOLDER
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rec in saebench_records(fl, core, sae_id, hook, model, sae_cfg, sae, tasks).items():
        p = dest / f"{sae_id}_{name}.json"
        # atomic: a link planted at `p` is replaced, never followed
        atomic_write_bytes(p, (json.dumps(rec, indent=1, default=str) + "\n").encode())
        paths.append(p)
    return paths
