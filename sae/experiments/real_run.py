"""Real run: BatchTopK, C²R, TopK, PolySAE and Coh at matched L0 on SmolLM2-135M's residual stream at
layer 15, trained from one store built by `interp cache`, scored on held-out shards with the corrected
codes and row rule. Writes <out>/saes/<run>_s<seed>/ (one SAE folder each), <out>/results.json and prints
a markdown table (mean ± half-range over seeds).

    interp cache --model smollm2-135m --hooks blocks.15.hook_resid_post --data usr-share-doc \\
        --max-tokens 2097152 --ctx-len 128 --seqs-per-shard 256 --dtype bfloat16 --out runs/saeeval/store
    python -m sae.experiments.real_run --store runs/saeeval/store --out runs/saeeval

The numbers in sae/README.md come from that store. `usr-share-doc` varies with the machine's installed packages
(see `interp.data.sources`), so the same command on another machine caches other text; its store's manifest
records the corpus digest the numbers belong to.

Hyper-parameters are the papers' (see sae/README.md): d_sae 2048, k 32, batch 1024, one pass over the
training shards, Adam at dictionary_learning's lr 2e-4/sqrt(d_sae/16384), warmup then linear decay over
the last 20%, official AuxK (1/32, normalised) for the BatchTopK family, C²R λ 5 normalised to the
official batch of 2048, PolySAE ranks (d_in, 64, 64), TopK and PolySAE both without decoder-norm
rescaling (as the PolySAE paper runs them), Coh on the TopK base with the paper's λ 1e-3 (summed).
Special rows follow `interp.cache.rows`' default (positions:0+norm-outliers:10) everywhere.

Metrics, all on the held-out shard(s), which no SAE trains on: FVU, L0, dead latents (inference codes:
BatchTopK family as JumpReLU; the batch-level FVU/L0 too for comparison); CE and KL recovered with the SAE
spliced into `--ce-seqs` held-out sequences (special rows left clean); the first-letter task (k=1
probing F1, absorption rate, split latents); W1 between the 5 commonest first letters in input units
(codes x atom norm); coherence locality of the codes; the pair statistic vs co-occurrence (Spearman; in
input units). SAEBench-format JSON of the absorption and probing evals goes next to each SAE.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import torch

RUNS: dict[str, tuple[str, dict[str, Any]]] = {
    "batchtopk": ("batchtopk", {}),
    "c2r": ("c2r", {"c2r_lambda": 5.0}),
    "topk": ("topk", {"rescale_acts_by_decoder_norm": False}),
    "poly": ("poly", {"rank2": 64, "rank3": 64}),
    "coh": ("coh_topk", {"rescale_acts_by_decoder_norm": False, "coh_lambda": 1e-3}),
    "batchtopk_saelens_auxk": ("batchtopk", {"auxk_style": "sae_lens", "aux_loss_coefficient": 1.0}),
}
"""Run name -> (architecture, settings). The last one (BatchTopK with sae-lens's AuxK: unnormalised, weight 1)
is a control for the dead latents the official AuxK leaves at this scale; it runs only when asked for."""

ZERO_CE: dict = {}
"""Zero-ablation CE per batch, shared by every SAE scored in this process (it does not depend on the SAE)."""

BASELINE = {"c2r": "batchtopk", "poly": "topk", "coh": "topk"}


def cooccurrence_spearman(sae: Any, z: torch.Tensor, top: int = 128) -> float:
    """Spearman over pairs of the `top` most frequent latents: pair statistic vs co-firing count
    (PolySAE: |λ2| ||B_ij||; linear SAEs: covariance of the codes in input units)."""
    from sae import metrics as M

    fires = (z > 0).float()
    idx = fires.mean(0).topk(top).indices
    N = fires[:, idx].T @ fires[:, idx]
    if hasattr(sae, "interaction_strength"):
        S = sae.interaction_strength()[idx][:, idx]
    else:
        zu = M.in_input_units(sae, z)[:, idx]
        zc = zu - zu.mean(0)
        S = zc.T @ zc / len(zc)
    iu = torch.triu_indices(top, top, 1)
    return M._spearman(S[iu[0], iu[1]], N[iu[0], iu[1]])


def plan(a: argparse.Namespace) -> list[tuple[str, int]]:
    """(run, seed) pairs in training order: --plan if given, else every run with its seeds, seed by seed
    (all runs' seed 0 first, so a cut-short session still has one of each)."""
    if a.plan:
        return [(p.split(":")[0], int(p.split(":")[1])) for p in a.plan.split(",")]
    seeds = [int(s) for s in a.seeds.split(",")]
    return [(n, s) for s in seeds for n in a.runs.split(",") if s == 0 or n not in a.one_seed.split(",")]


def train_all(a: argparse.Namespace, store: Any) -> list[tuple[str, int, Path]]:
    from sae.baselines import paper_settings
    from sae.train import TrainConfig, train_sae

    out = []
    for name, seed in plan(a):
        arch, settings = RUNS[name]
        if True:
            folder = Path(a.out) / "saes" / f"{name}_s{seed}"
            cfg = TrainConfig(
                arch=arch,
                d_sae=a.d_sae,
                k=a.k,
                hook=a.hook,
                total_tokens=a.tokens,
                batch_size=a.batch_size,
                lr=a.lr,
                seed=seed,
                checkpoint_every=32,
                holdout_shards=a.holdout_shards,
                dead_window_tokens=a.dead_window_tokens,
                lr_warmup_steps=min(1000, a.tokens // a.batch_size // 10),
                settings={**paper_settings(arch), **settings},
            )  # the papers' AuxK, C²R normalisation
            t0 = time.perf_counter()
            _, rep = train_sae(store, cfg, folder, progress=False)
            print(
                json.dumps(
                    {
                        "trained": str(folder),
                        "seconds": round(time.perf_counter() - t0, 1),
                        "tokens_per_second": rep["tokens_per_second"],
                    }
                ),
                flush=True,
            )
            out.append((name, seed, folder))
    write_ready(Path(a.out))
    return out


def write_ready(out: Path) -> None:
    """<out>/READY.txt: every finished SAE folder under <out>/saes (train_report.json written last)."""
    done = sorted(f for f in (out / "saes").glob("*_s*") if (f / "train_report.json").is_file())
    (out / "READY.txt").write_text("".join(f"{f}\n" for f in done))


def evaluate_one(
    a: argparse.Namespace, store: Any, model: Any, folder: Path, words: Any, wx: torch.Tensor, seqs: torch.Tensor
) -> dict[str, Any]:
    from sae import load_sae
    from sae import metrics as M
    from sae.evaluate import eval_rows, evaluate_store, kept_rows, sae_row_filter
    from sae.inference import is_batch_topk
    from sae.saebench import write_saebench

    inf = load_sae(folder)
    train_obj = load_sae(folder, inference=False)
    ev = evaluate_store(inf, store, folder, a.hook, max_rows=a.eval_rows)
    row: dict[str, Any] = {
        "fvu": ev["fvu"],
        "l0": ev["l0"],
        "dead_frac": ev["dead_frac"],
        "rows": ev["rows"],
        "rows_excluded": ev["rows_excluded"],
    }
    if is_batch_topk(train_obj):
        evb = evaluate_store(train_obj, store, folder, a.hook, max_rows=a.eval_rows, codes="batch")
        row.update(fvu_batch_codes=evb["fvu"], l0_batch_codes=evb["l0"])
    filt = sae_row_filter(folder, store, a.hook)
    spl = M.spliced_loss(model, inf, a.hook, seqs, rows=filt, cache=ZERO_CE)
    row.update(ce_recovered=spl["ce_recovered"], kl=spl["kl"], spliced_frac=spl["spliced_frac"])
    fl = M.first_letter_absorption(wx, words, inf)
    row.update(first_letter_f1_k1=fl["mean_f1_k1"], absorption=fl["mean_absorption"], n_split=fl["mean_num_split"])
    zw = M.encode(inf, wx)
    first = torch.tensor([ord(w[0]) for _, w in words])
    letters = sorted({int(c) for c in first.tolist()}, key=lambda c: -int((first == c).sum()))[:5]
    row["w1_input_units"] = sum(M.w1_common(inf, zw, first == c) for c in letters) / len(letters)
    row["w1_raw_codes"] = sum(M.mean_w1(zw, first == c) for c in letters) / len(letters)
    row["median_atom_norm"] = float(M.atom_norms(inf).median())
    x = kept_rows(store, a.hook, eval_rows(folder, store)[1], filt, a.eval_rows)[a.hook].float()
    z = M.encode(inf, x)
    row["locality"] = M.coherence_metrics(z)["locality"]
    row["pair_vs_cooccurrence_spearman"] = cooccurrence_spearman(inf, z)
    write_saebench(folder, fl, row, sae_id=folder.name, hook=a.hook, model=a.model)
    return row


def summarise(rows: list[dict[str, Any]], cols: list[str]) -> list[dict[str, Any]]:
    """Mean and half-range over seeds for each run name."""
    out = []
    for name in dict.fromkeys(r["run"] for r in rows):
        rs = [r for r in rows if r["run"] == name]
        s: dict[str, Any] = {"run": name, "seeds": len(rs)}
        for c in cols:
            v = [r[c] for r in rs if r.get(c) is not None and not (isinstance(r[c], float) and math.isnan(r[c]))]
            if v:
                s[c] = sum(v) / len(v)
                s[c + "_halfrange"] = (max(v) - min(v)) / 2
        out.append(s)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import interp
    from interp.store import ActivationStore
    from sae import metrics as M
    from sae.cli import _store_sequences
    from sae.evaluate import eval_rows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="runs/saeeval/store")
    ap.add_argument("--hook", default="blocks.15.hook_resid_post")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--runs", default="batchtopk,c2r,topk,poly,coh", help=f"comma-separated names of {list(RUNS)}")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--one-seed", default="coh", help="runs trained with seed 0 only")
    ap.add_argument("--plan", default="", help="explicit run:seed list in training order (overrides --runs/--seeds)")
    ap.add_argument("--holdout-shards", type=int, default=1)
    ap.add_argument("--d-sae", type=int, default=2048)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=0, help="training tokens (0: one pass over the training shards)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.0, help="0: dictionary_learning's 2e-4 / sqrt(d_sae / 16384)")
    ap.add_argument("--dead-window-tokens", type=int, default=100_000)
    ap.add_argument("--eval-rows", type=int, default=16_384)
    ap.add_argument("--ce-seqs", type=int, default=8)
    ap.add_argument("--words", type=int, default=1000)
    ap.add_argument("--out", default="runs/saeeval")
    ap.add_argument("--skip-train", action="store_true", help="evaluate the SAE folders already in <out>/saes")
    ap.add_argument("--results", default="results.json", help="file name of the results under --out")
    ap.add_argument("--train-only", action="store_true", help="train the plan's SAEs and stop")
    ap.add_argument("--watch", action="store_true", help="evaluate the plan's SAEs as their training runs finish")
    ap.add_argument(
        "--merge", default="", help="comma-separated results files under --out: print and write their joint summary"
    )
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    store = ActivationStore.open(a.store)
    if not a.lr:
        a.lr = 2e-4 / math.sqrt(a.d_sae / 16384)
    if not a.tokens:
        n_train = sum(
            store.shard_info(i).n_rows for i in store.shard_indices[: len(store.shard_indices) - a.holdout_shards]
        )
        a.tokens = int(n_train * 0.98) // a.batch_size * a.batch_size  # ~1-2% are special rows, dropped
    if a.merge:
        return merge(a)
    t0 = time.perf_counter()
    if a.skip_train or a.watch:  # the finished SAE folders of the plan (--watch: as they finish)
        trained = [(n, s, Path(a.out) / "saes" / f"{n}_s{s}") for n, s in plan(a)]
    else:
        trained = train_all(a, store)
    train_seconds = time.perf_counter() - t0
    if a.train_only:
        return {"trained": [str(f) for _, _, f in trained], "train_seconds": train_seconds}
    model = interp.load_model(a.model)
    rows_idx = (
        eval_rows(None, store)[1]
        if a.holdout_shards == 0
        else store.shard_rows(store.shard_indices[-a.holdout_shards :])
    )
    seqs = _store_sequences(store, a.ce_seqs, rows_idx)
    words = M.first_letter_words(model.tokenizer, limit=a.words)
    wx = M.word_activations(model, a.hook, words)
    results: dict[str, Any] = {"settings": vars(a), "train_seconds": round(train_seconds, 1), "rows": []}
    todo = list(trained)
    while todo:
        ready = [t for t in todo if (t[2] / "train_report.json").is_file()]
        if not ready:
            if not a.watch:
                break
            time.sleep(30)
            continue
        name, seed, folder = ready[0]
        todo.remove(ready[0])
        t1 = time.perf_counter()
        row = {
            "run": name,
            "seed": seed,
            "arch": RUNS[name][0],
            "folder": str(folder),
            **evaluate_one(a, store, model, folder, words, wx, seqs),
        }
        row["eval_seconds"] = time.perf_counter() - t1
        row = M.round_dict(row)
        results["rows"].append(row)
        print(json.dumps(row), flush=True)
        (Path(a.out) / a.results).write_text(json.dumps(results, indent=1) + "\n")  # partial results survive a kill
    return finish(a, results, t0)


COLS = [
    "fvu",
    "l0",
    "dead_frac",
    "fvu_batch_codes",
    "l0_batch_codes",
    "ce_recovered",
    "kl",
    "first_letter_f1_k1",
    "absorption",
    "n_split",
    "w1_input_units",
    "w1_raw_codes",
    "locality",
    "pair_vs_cooccurrence_spearman",
]


def merge(a: argparse.Namespace) -> dict[str, Any]:
    """The joint summary of several results files (e.g. two processes' halves of one plan)."""
    rows, parts = [], []
    for name in a.merge.split(","):
        r = json.loads((Path(a.out) / name).read_text())
        rows += r["rows"]
        parts.append({"file": name, "train_seconds": r.get("train_seconds"), "total_seconds": r.get("total_seconds")})
    order = list(RUNS)
    seen: set[tuple[str, int]] = set()
    rows = [r for r in rows if (r["run"], r["seed"]) not in seen and not seen.add((r["run"], r["seed"]))]
    rows.sort(key=lambda r: (order.index(r["run"]), r["seed"]))
    return finish(a, {"settings": vars(a), "parts": parts, "rows": rows}, None)


def finish(a: argparse.Namespace, results: dict[str, Any], t0: float | None) -> dict[str, Any]:
    from sae import metrics as M

    results["summary"] = [M.round_dict(s) for s in summarise(results["rows"], COLS)]
    if t0 is not None:
        results["total_seconds"] = round(time.perf_counter() - t0, 1)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / a.results).write_text(json.dumps(results, indent=1) + "\n")
    show = [
        "fvu",
        "l0",
        "ce_recovered",
        "kl",
        "first_letter_f1_k1",
        "absorption",
        "n_split",
        "w1_input_units",
        "locality",
        "pair_vs_cooccurrence_spearman",
    ]
    print("| run | seeds | " + " | ".join(show) + " |\n|" + "---|" * (len(show) + 2))
    for s in results["summary"]:
        cells = [f"{s[c]:.3f} ± {s[c + '_halfrange']:.3f}" if c in s else "" for c in show]
        print(f"| {s['run']} | {s['seeds']} | " + " | ".join(cells) + " |")
    return results


if __name__ == "__main__":
    main()
