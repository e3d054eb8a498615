"""SAEBench's own sparse-probing code as referee for `sae.sparse_probing`, on token-level tasks from a store.

SAEBench's datasets are downloads; the tasks here are built from the store's rows (`sae.sparse_probing.TASKS`,
ours). On the same rows, each probe family is run twice with the global torch generator seeded the same way:
SAEBench's `evals.sparse_probing.probe_training.train_probe_on_activations` (its balanced one-vs-rest sets,
top-k mean-difference selection, sklearn logistic regression; for the every-channel probe its torch probe
with the settings its `run_eval_single_dataset` passes) and ours (`sae.sparse_probing.probe_accuracy`). The
sets are the same (same `torch.randperm` calls), so differences come from the solvers only.

    SAE_BENCH_DIR=/work/sae_bench_pkgs SAE_BENCH_DEPS=/work/sae_bench_deps \\
      python -m sae.experiments.saebench_sparse_probing --sae RUN/ours_topk --store STORE --model smollm2-135m

Prints one JSON object: per task and probe family, the mean test accuracy of SAEBench's code and ours, and
the largest per-class difference.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from interp.infra.argtypes import out_file, positive_int, sae_folder, store_folder
from sae.experiments.saebench_referee import add_saebench_path, emit_json


def saebench_family(train: dict, test: dict, k: int | None, seed: int) -> dict[str, float]:
    """SAEBench's `train_probe_on_activations` for one probe family (every channel: its torch probe)."""
    from sae_bench.evals.sparse_probing import probe_training as P

    torch.manual_seed(seed)
    if k is None:  # as its run_eval_single_dataset trains the every-channel probe
        _, acc = P.train_probe_on_activations(train, test, None, use_sklearn=False, batch_size=250, epochs=100, lr=1e-2)
    else:
        _, acc = P.train_probe_on_activations(train, test, select_top_k=k)
    return {c: float(v) for c, v in acc.items()}


def referee(tasks: dict, encode: Any, ks: tuple[int, ...], seed: int) -> dict[str, Any]:
    """Both implementations on each task's rows; ours and SAEBench's mean accuracy per family."""
    from sae.sparse_probing import probe_accuracy

    out: dict[str, Any] = {}
    for task, (xtr, xte) in tasks.items():
        ztr = {c: encode(v) for c, v in xtr.items()}
        zte = {c: encode(v) for c, v in xte.items()}
        fams = [("llm", xtr, xte, None)] + [(f"llm_top_{k}", xtr, xte, k) for k in ks]
        fams += [(f"sae_top_{k}", ztr, zte, k) for k in ks]
        rows = {}
        for name, tr, te, k in fams:
            theirs = saebench_family(tr, te, k, seed)
            torch.manual_seed(seed)
            ours = probe_accuracy(tr, te, k)
            rows[name] = {
                "saebench": sum(theirs.values()) / len(theirs),
                "ours": sum(ours.values()) / len(ours),
                "max_class_abs_diff": max(abs(theirs[c] - ours[c]) for c in ours),
            }
        out[task] = {"classes": {c: [len(xtr[c]), len(xte[c])] for c in xtr}, "families": rows}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sae", required=True, type=sae_folder, help="SAE folder (scored as shipped)")
    ap.add_argument("--store", required=True, type=store_folder)
    ap.add_argument("--model", required=True, help="the store's model spec (for its tokenizer)")
    ap.add_argument("--n-train", type=positive_int, default=4000, help="rows per class (SAEBench: 4,000)")
    ap.add_argument("--n-test", type=positive_int, default=1000, help="rows per class (SAEBench: 1,000)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument(
        "--rows",
        choices=("rule", "all"),
        default="rule",
        help="draw the tasks from the rows the SAE's row rule keeps (as `sae eval --suite saebench`), or from all",
    )
    ap.add_argument("--threads", type=positive_int, default=1)
    ap.add_argument("--out", type=out_file, help="also write the JSON here")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    import jaxtyping

    # SAEBench's `train_probe_on_activations` is shape-checked with jaxtyping; under jaxtyping 0.3 the
    # dimension it binds on its inputs (N rows per class) leaks into the nested `train_sklearn_probe` call,
    # which gets the balanced 2N rows and raises. Its arithmetic does not depend on the checks: switched off.
    jaxtyping.config.update("jaxtyping_disable", True)
    why = add_saebench_path()
    if why:
        raise SystemExit(f"cannot run SAEBench's code: {why}")
    from interp.dashboards.tokens import load_tokenizer
    from interp.store import ActivationStore
    from sae import load_sae
    from sae.inference import to_inference
    from sae.sparse_probing import K_VALUES, store_tasks

    store = ActivationStore.open(a.store)
    sae = to_inference(load_sae(a.sae))
    hook = sae.cfg.metadata.hook_name
    try:
        tok = load_tokenizer(a.model)
    except ValueError as exc:  # an unknown spec: the registry's message names the valid ones
        ap.error(f"--model: {exc}")
    rows = None
    if a.rows == "rule":
        from sae.evaluate import ruled_rows, sae_row_filter

        rows = ruled_rows(store, hook, sae_row_filter(a.sae, store, hook))
    tasks = store_tasks(store, hook, lambda t: tok.decode([t]), a.n_train, a.n_test, seed=a.seed, rows=rows)

    @torch.no_grad()
    def encode(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([sae.encode(c) for c in x.split(4096)])

    res = {"sae": a.sae, "store": a.store, "hook": hook, "tasks": referee(tasks, encode, K_VALUES, a.seed)}
    emit_json(res, a.out)
    return res


if __name__ == "__main__":
    main()
