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
- `sparse_probing`: the probing tasks are the 26 first-letter classes of the same words (SAEBench's
  eight downloaded text-classification sets are replaced, since this machine has no network);
  `sae_top_1_test_accuracy` is our k=1 probe F1 averaged over letters (SAEBench reports accuracy).
- `core`: FVU / explained variance, L0, dead fraction, CE and KL recovered, with the row rule used.

`sae_bench_commit_hash` is "not-sae-bench": these files are SAEBench-shaped, not produced by SAEBench.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

SUITE = ("absorption_first_letter", "sparse_probing", "core")
"""The eval types `--suite saebench` writes."""


def _envelope(eval_type: str, config: dict[str, Any], metrics: dict[str, Any], details: list[dict[str, Any]],
              sae_id: str, sae_cfg: dict[str, Any] | None) -> dict[str, Any]:
    import sae_lens

    return {
        "eval_type_id": eval_type,
        "eval_config": config,
        "eval_id": str(uuid.uuid4()),
        "datetime_epoch_millis": int(time.time() * 1000),
        "eval_result_metrics": metrics,
        "eval_result_details": details,
        "eval_result_unstructured": None,
        "sae_bench_commit_hash": "not-sae-bench",
        "sae_lens_id": sae_id,
        "sae_lens_release_id": "local",
        "sae_lens_version": getattr(sae_lens, "__version__", "unknown"),
        "sae_cfg_dict": sae_cfg or {},
    }


def saebench_records(fl: dict[str, Any], core: dict[str, Any], sae_id: str, hook: str, model: str,
                     sae_cfg: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The three SAEBench-format records from `metrics.first_letter_absorption`'s output (`fl`) and the
    core metrics (`core`: fvu, l0, dead_frac, optional ce_recovered, kl, row_rule)."""
    letters = fl["letters"]
    cfg = {"model_name": model, "hook_name": hook, "implementation": "sae.metrics.first_letter_absorption",
           "prompt_template": "The word is {word}", "k_sparse_probe_max": 3, "split_gain": 0.03,
           "absorbing_latent_min_cosine": 0.025}
    absorption = _envelope(
        "absorption_first_letter", cfg,
        {"mean": {"mean_full_absorption_score": fl["mean_absorption"], "mean_num_split_features": fl["mean_num_split"]}},
        [{"first_letter": L, "full_absorption_rate": v["absorption"], "num_split_features": v["n_split"]}
         for L, v in sorted(letters.items())], sae_id, sae_cfg)
    probing = _envelope(
        "sparse_probing", {**cfg, "dataset_names": ["first_letter (26 one-vs-rest tasks, local vocabulary)"]},
        {"sae": {"sae_top_1_test_f1": fl["mean_f1_k1"]}},
        [{"dataset_name": f"first_letter_{L}", "sae_top_1_test_f1": v["f1_k1"]} for L, v in sorted(letters.items())],
        sae_id, sae_cfg)
    core_rec = _envelope(
        "core", {"model_name": model, "hook_name": hook, "row_rule": core.get("row_rule")},
        {"reconstruction_quality": {"explained_variance": 1 - core["fvu"], "fvu": core["fvu"]},
         "sparsity": {"l0": core["l0"]},
         "misc": {"frac_dead_latents": core.get("dead_frac")},
         "model_performance_preservation": {"ce_loss_score": core.get("ce_recovered")},
         "model_behavior_preservation": {"kl_div": core.get("kl")}},
        [], sae_id, sae_cfg)
    return {"absorption_first_letter": absorption, "sparse_probing": probing, "core": core_rec}


def write_saebench(folder: str | Path, fl: dict[str, Any], core: dict[str, Any], sae_id: str, hook: str, model: str,
                   out: str | Path | None = None) -> list[Path]:
    """Write `<out or folder/saebench>/<sae_id>_<eval_type>.json` for the three evals; returns the paths."""
    cfg_file = Path(folder) / "cfg.json"
    sae_cfg = json.loads(cfg_file.read_text()) if cfg_file.is_file() else None
    dest = Path(out) if out is not None else Path(folder) / "saebench"
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rec in saebench_records(fl, core, sae_id, hook, model, sae_cfg).items():
        p = dest / f"{sae_id}_{name}.json"
        p.write_text(json.dumps(rec, indent=1, default=str) + "\n")
        paths.append(p)
    return paths
