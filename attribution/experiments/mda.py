"""MDA on a small Pythia-shaped model trained here: which samples drive induction-head formation?

    python -m attribution.experiments.mda --out runs/mda            # ~20-40 min on 2 busy cores
    python -m attribution.experiments.mda --out runs/mda_q --quick  # a smoke run

1. Corpus (byte tokens, ctx 64): 85% prose (docstrings of the Python standard library) and 15% XML
   records whose tag and attribute names are random strings, so a closing tag can only be predicted by
   copying its opening tag (repetitive structure, the paper's "catalyst").
2. Train a 2-layer GPT-NeoX (d 128, 4 heads) and log every head's prefix-matching score; the target is
   the layer-1 head with the highest final score; the onset is the first logged step where it passes
   `--onset` (0.1 by default), and the head has *emerged* when it passes `--threshold` (0.3).
3. At the onset checkpoint: EK-FAC on the head's W_Q, W_K (labels sampled from the model), probe =
   correctly aligned copy-target log-prob on `[r, r]`; influence of every pool sequence.
4. Enrichment: share of XML among the top 5% against its base rate, and AUPRC of XML-vs-prose.
5. Causal check: retrain from the same init and data order with the top 5% removed, a random 5% removed,
   and the top 5% duplicated; emergence step and ICL score (loss at 60 - loss at 8) of each.
Results go to `OUT/result.json`.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time
from pathlib import Path

import torch

import interp
from attribution.dra import average_precision
from attribution.influence import HeadComponent
from attribution.mda import (
    emergence_step,
    icl_score,
    prefix_matching_scores,
    previous_token_scores,
    rank_training_samples,
)
from attribution.train import Intervention, train_lm
from interp.data import byte_tokenizer, resolve_corpus
from interp.models.pythia import random_pythia

LETTERS = (97, 123)
"""Probe tokens: lowercase ASCII letters (bytes the model sees in training; random bytes would hit untrained
embeddings)."""


def xml_records(n: int, ctx: int, seed: int, tokenizer) -> torch.Tensor:
    rng = random.Random(seed)

    def name(lo=3, hi=7):
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi)))

    rows = []
    while len(rows) < n:
        text = ""
        while len(text) < 3 * ctx:
            tag, field = name(), name()
            text += f'<{tag} {field}="{name(2, 4)}"><{field}>{name()}</{field}></{tag}>\n'
        ids = tokenizer(text)["input_ids"]
        start = rng.randint(0, len(ids) - ctx)
        rows.append(ids[start : start + ctx])
    return torch.tensor(rows)


def build_corpus(n: int, ctx: int, xml_frac: float, seed: int):
    tok = byte_tokenizer()
    n_xml = int(round(n * xml_frac))
    prose = resolve_corpus("stdlib-docs", tok, ctx_len=ctx, max_tokens=(n - n_xml) * ctx, seed=seed).tokens.long()
    xml = xml_records(n_xml, ctx, seed, tok)
    pool = torch.cat([prose[: n - n_xml], xml])
    is_xml = torch.cat([torch.zeros(len(prose[: n - n_xml])), torch.ones(n_xml)]).long()
    perm = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))
    return pool[perm], is_xml[perm]


def new_model(seed: int, device: str = "cpu"):
    hf = random_pythia(
        "14m",
        seed=seed,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        vocab_size=257,
        max_position_embeddings=64,
    )
    return interp.HookedModel(hf.to(device), byte_tokenizer())  # initialised on the CPU: the same on every device


def train_run(args, pool, icl_ids, intervention=None, out=None, save_steps=(), steps=None):
    model = new_model(args.seed, args.device)

    def evaluate(hf, step):
        return scores_of(model)

    log = train_lm(
        model.hf_model,
        pool,
        steps=steps or args.steps,
        batch_size=args.batch,
        lr=args.lr,
        seed=args.seed,
        intervention=intervention,
        eval_every=args.eval_every,
        eval_fn=evaluate,
        save_steps=save_steps,
        out=out,
        progress=False,
    )
    log["icl"] = icl_score(model, icl_ids, early=8, late=60)
    return model, log


def scores_of(model) -> dict:
    """Prefix-matching and previous-token scores of every head, on lowercase-letter probes."""
    return {
        "pm": prefix_matching_scores(model, n=16, half=24, seed=123, tokens=LETTERS).tolist(),
        "prev": previous_token_scores(model, n=16, length=48, seed=123, tokens=LETTERS).tolist(),
    }


def baseline(args, out, pool, icl_ids, save_steps) -> dict:
    """Train the baseline (saving checkpoints), or rebuild its log from the checkpoints of an earlier run."""
    path = out / "baseline.json"
    if path.exists():
        return json.loads(path.read_text())
    last = out / "baseline" / f"step_{args.steps}"
    if last.exists():
        evals = [{"step": 0, **scores_of(new_model(args.seed, args.device))}]
        for s in save_steps:
            evals.append(
                {"step": s, **scores_of(interp.load_model(str(out / "baseline" / f"step_{s}"), device=args.device))}
            )
        log = {"evals": evals, "losses": []}
    else:
        _, log = train_run(args, pool, icl_ids, out=out / "baseline", save_steps=save_steps)
    log["icl_at"] = {
        str(s): icl_score(interp.load_model(str(out / "baseline" / f"step_{s}"), device=args.device), icl_ids, 8, 60)
        for s in {args.retrain_steps, args.steps}
        if (out / "baseline" / f"step_{s}").exists()
    }
    log["icl"] = log["icl_at"][str(args.steps)]
    path.write_text(json.dumps({k: v for k, v in log.items() if k != "stream"}))
    return log


def ranking(args, out, pool, onset, layer, head, probe) -> dict:
    """MDA scores of every pool sequence at the onset checkpoint (cached in OUT/ranking.json)."""
    path = out / "ranking.json"
    if path.exists():
        r = json.loads(path.read_text())
        return {"scores": torch.tensor(r["scores"]), "order": torch.tensor(r["order"])}
    ck = interp.load_model(str(out / "baseline" / f"step_{onset}"), device=args.device)
    fit = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(args.seed))[:256]]
    rank = rank_training_samples(
        ck,
        HeadComponent(layer, head, "qk"),
        pool,
        fit_ids=fit,
        probe=probe,
        n_probe=32,
        half=32,
        seed=args.seed,
        tokens=LETTERS,
    )
    path.write_text(
        json.dumps(
            {
                "scores": rank["scores"].tolist(),
                "order": rank["order"].tolist(),
                "component": rank["component"],
                "onset": onset,
            }
        )
    )
    return rank


TARGETS = {"induction": ("pm", 1, "copy"), "prev": ("prev", 0, "prev")}
"""target -> (score key, layer, MDA probe)."""


def head_curve(log, head, target="induction"):
    key, layer, _ = TARGETS[target]
    return [{"step": e["step"], "score": e[key][layer][head]} for e in log["evals"]]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/mda")
    p.add_argument("--pool", type=int, default=4096)
    p.add_argument("--xml-frac", type=float, default=0.15)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--onset", type=float, default=0.1)
    p.add_argument("--threshold", type=float, default=0.3)
    p.add_argument("--top-frac", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--target",
        choices=list(TARGETS),
        default="induction",
        help="induction head (layer 1, copy probe) or previous-token head (layer 0, prev probe)",
    )
    p.add_argument("--retrain-steps", type=int, default=None, help="steps of the intervention runs (default --steps)")
    p.add_argument("--only", choices=["remove_top", "remove_random", "duplicate_top"], help="run one intervention")
    p.add_argument("--parallel", action="store_true", help="run the three interventions as parallel processes")
    p.add_argument("--quick", action="store_true", help="tiny pool and few steps (smoke test)")
    p.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (models train and are scored there)")
    args = p.parse_args(argv)
    from interp.infra.devices import resolve_device

    args.device = resolve_device(args.device)
    if args.quick:
        args.pool, args.steps, args.eval_every = 256, 60, 20
    args.retrain_steps = min(args.retrain_steps or args.steps, args.steps)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pool, is_xml = build_corpus(args.pool, 64, args.xml_frac, args.seed)
    icl_ids = resolve_corpus("stdlib-docs", byte_tokenizer(), ctx_len=64, max_tokens=64 * 64, seed=99).tokens.long()
    save_steps = tuple(range(args.eval_every, args.steps + 1, args.eval_every))
    base = baseline(args, out, pool, icl_ids, save_steps)
    key, layer, probe = TARGETS[args.target]
    final = torch.tensor(base["evals"][-1][key])
    head = int(final[layer].argmax())
    curve = head_curve(base, head, args.target)
    onset = next((c["step"] for c in curve if c["score"] >= args.onset and c["step"] > 0), save_steps[-1])
    onset = min(save_steps, key=lambda s: abs(s - onset))
    print(f"baseline: head L{layer}H{head} final {key} {final[layer, head]:.3f}, onset step {onset}", flush=True)
    rank = ranking(args, out, pool, onset, layer, head, probe)
    k = int(round(args.top_frac * len(pool)))
    top = rank["order"][:k]
    rand = torch.randperm(len(pool), generator=torch.Generator().manual_seed(args.seed + 7))[:k]
    enrichment = {
        "top_xml_share": float(is_xml[top].float().mean()),
        "base_rate": float(is_xml.float().mean()),
        "auprc_xml": average_precision(rank["scores"], is_xml),
        "bottom_xml_share": float(is_xml[rank["order"][-k:]].float().mean()),
    }
    print("enrichment:", enrichment, flush=True)
    interventions = {
        "remove_top": Intervention(remove=top.tolist()),
        "remove_random": Intervention(remove=rand.tolist()),
        "duplicate_top": Intervention(duplicate=top.tolist()),
    }
    if args.only:
        _, log = train_run(args, pool, icl_ids, intervention=interventions[args.only], steps=args.retrain_steps)
        (out / f"run_{args.only}.json").write_text(json.dumps({k: v for k, v in log.items() if k != "stream"}))
        return {}
    if args.parallel:  # one process per intervention (each single-threaded)
        import subprocess
        import sys

        argv_ = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--parallel"]
        procs = [
            subprocess.Popen([sys.executable, "-m", "attribution.experiments.mda", *argv_, "--only", name])
            for name in interventions
            if not (out / f"run_{name}.json").exists()
        ]
        if any(p.wait() for p in procs):
            raise RuntimeError("an intervention run failed")
    runs = {"baseline": base}
    for name, iv in interventions.items():
        path = out / f"run_{name}.json"
        if not path.exists():
            _, log = train_run(args, pool, icl_ids, intervention=iv, steps=args.retrain_steps)
            path.write_text(json.dumps({k: v for k, v in log.items() if k != "stream"}))
        runs[name] = json.loads(path.read_text())
        print(name, "done", flush=True)
    if args.retrain_steps < args.steps:  # compare at the same step count
        base = dict(
            base,
            evals=[e for e in base["evals"] if e["step"] <= args.retrain_steps],
            icl=base["icl_at"].get(str(args.retrain_steps), base["icl"]),
        )
        runs["baseline"] = base
    table = {}
    for name, log in runs.items():
        c = head_curve(log, head, args.target)
        table[name] = {
            "emergence_step": emergence_step([{"step": x["step"], "s": x["score"]} for x in c], "s", args.threshold),
            "final_score": c[-1]["score"],
            "icl": log["icl"],
            "final_loss": sum(log["losses"][-50:]) / 50,
            "curve": c,
        }
        print(
            f"{name:14s} emergence {table[name]['emergence_step']}  final {c[-1]['score']:.3f}  ICL {log['icl']:.3f}",
            flush=True,
        )
    result = {
        "args": vars(args),
        "head": f"L{layer}H{head}",
        "onset_step": onset,
        "enrichment": enrichment,
        "runs": table,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "result.json").write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
