"""MDA's causal claim on a real induction head: 2-layer attention-only model, random-offset repeats.

    nice -n 10 python -m attribution.experiments.induction --out /work/runs/attr/induction   # resumable
    python -m attribution.experiments.induction --out /tmp/ind_q --quick                      # smoke run

Setting (sized for a shared 2-core CPU; NOTES.md measured a real induction head at vocab 2,048 / d 256
after ~4,600 steps, this is a smaller vocabulary and width so each run takes minutes):
- Model: GPT-NeoX shape, 2 layers, d 64, 4 heads, rotary on all head dims, sequential residual, and
  *no MLP* (each block's MLP is a parameter-free zero module), so the model is attention-only.
- Pool of `--pool` sequences of 64 tokens (token 0 first, then uniform tokens from [1, vocab)); a fraction
  `--rep-frac` hold one repeated span: length uniform in [10, 28], both copies at random offsets (random
  offsets and lengths prevent the positional shortcut NOTES.md warns about). Only repeats can teach
  induction; the other rows are noise for it.
- Formation: the best layer-1 head's prefix-matching score (Olsson, `[BOS, r, r]`, r of 24 tokens)
  evaluated every `--eval-every` steps; formed = first step with score >= `--threshold`. The layer-0
  previous-token score is logged to check that the head is a real two-head induction circuit.
- MDA: at the baseline's onset checkpoint (the last eval before formation) EK-FAC on the target
  head's W_Q, W_K, copy-target probe; influence of every pool sequence.
- Arms, each with seeds 0..`--seeds`-1 (seed = init and data order; the ranking comes from seed 0):
  baseline, `remove_top` (k highest), `remove_random` (k random), `remove_bottom` (k most negative),
  k = `--k-frac` of the pool. Every run writes `OUT/<arm>_s<seed>.json` and is skipped when it exists,
  so a killed experiment resumes where it stopped. `OUT/result.json` gathers the table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from torch import nn

import interp
from attribution.influence import HeadComponent
from attribution.mda import prefix_matching_scores, previous_token_scores, rank_training_samples
from attribution.train import Intervention, train_lm

CTX = 64
ARMS = ("baseline", "remove_top", "remove_random", "remove_bottom")


class NoMLP(nn.Module):
    """Stands in for a block's MLP: adds nothing to the residual stream (attention-only model)."""

    def forward(self, x):
        return torch.zeros_like(x)


def new_model(args, seed: int):
    """Seeded attention-only GPT-NeoX (the MLP modules replaced by `NoMLP`)."""
    from interp.models.pythia import random_pythia

    hf = random_pythia(
        "14m",
        seed=seed,
        hidden_size=args.d_model,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=4,
        vocab_size=args.vocab,
        max_position_embeddings=CTX,
        use_parallel_residual=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
    )
    for layer in hf.gpt_neox.layers:
        layer.mlp = NoMLP()
    return interp.HookedModel(hf, None)


def build_pool(
    n: int, vocab: int, rep_frac: float, seed: int, span: tuple[int, int] = (10, 28), lengths: list | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(pool [n, CTX], has_repeat [n]): uniform tokens, a `rep_frac` share with one random-offset repeat.
    `lengths`, if given, receives (row, repeated span length) pairs."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.randint(1, vocab, (n, CTX), generator=g)
    pool[:, 0] = 0
    has = torch.rand(n, generator=g) < rep_frac
    for i in torch.nonzero(has).flatten().tolist():
        length = int(torch.randint(span[0], span[1] + 1, (1,), generator=g))
        a = int(torch.randint(1, CTX - 2 * length + 1, (1,), generator=g))
        b = int(torch.randint(a + length, CTX - length + 1, (1,), generator=g))
        pool[i, b : b + length] = pool[i, a : a + length]
        if lengths is not None:
            lengths.append((i, length))
    return pool, has.long()


def head_scores(model, vocab: int) -> dict:
    return {
        "pm": prefix_matching_scores(model, n=16, half=24, seed=123, tokens=(1, vocab)).tolist(),
        "prev": previous_token_scores(model, n=16, length=48, seed=123, tokens=(1, vocab)).tolist(),
    }


def run_arm(args, out: Path, pool, arm: str, seed: int, remove: list[int]) -> dict:
    """Train one arm/seed (or read its finished result); keeps the onset checkpoint of baseline seed 0."""
    path = out / f"{arm}_s{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    model = new_model(args, seed)
    keep_ckpt = arm == "baseline" and seed == 0
    states = {}

    def evaluate(hf, step):
        s = head_scores(model, args.vocab)
        if keep_ckpt:
            states[step] = {k: v.detach().clone() for k, v in hf.state_dict().items()}
        return s

    t0 = time.perf_counter()
    log = train_lm(
        model.hf_model,
        pool,
        steps=args.steps,
        batch_size=args.batch,
        lr=args.lr,
        seed=seed,
        intervention=Intervention(remove=remove),
        eval_every=args.eval_every,
        eval_fn=evaluate,
    )
    curve = [
        {
            "step": e["step"],
            "pm": max(e["pm"][1]),
            "head": int(torch.tensor(e["pm"][1]).argmax()),
            "prev": max(e["prev"][0]),
        }
        for e in log["evals"]
    ]
    formed = next((c["step"] for c in curve if c["pm"] >= args.threshold), None)
    res = {
        "arm": arm,
        "seed": seed,
        "k": len(remove),
        "formation_step": formed,
        "final_pm": curve[-1]["pm"],
        "final_prev": curve[-1]["prev"],
        "final_loss": statistics.mean(log["losses"][-50:]),
        "curve": curve,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if keep_ckpt:
        from safetensors.torch import save_file

        # The checkpoint at or just before formation (spec 2.4): the last eval below the threshold.
        before = [c["step"] for c in curve if c["step"] > 0 and (formed is None or c["step"] < formed)]
        onset = before[-1] if before else curve[-1]["step"]
        save_file(states[onset], str(out / "onset.safetensors"))
        res |= {"onset_step": onset, "target_head": curve[-1]["head"]}
    path.write_text(json.dumps(res))
    print(
        f"{arm} seed {seed}: formed at {formed}, final pm {res['final_pm']:.3f} prev {res['final_prev']:.3f} "
        f"({res['seconds']} s)",
        flush=True,
    )
    return res


def ranking(args, out: Path, pool, base: dict) -> torch.Tensor:
    """MDA scores of every pool row at the baseline's onset checkpoint (cached in OUT/ranking.json)."""
    path = out / "ranking.json"
    if path.exists():
        return torch.tensor(json.loads(path.read_text())["scores"])
    from safetensors.torch import load_file

    model = new_model(args, 0)
    model.hf_model.load_state_dict(load_file(str(out / "onset.safetensors")))
    comp = HeadComponent(1, base["target_head"], "qk")
    fit = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(0))[:256]]
    t0 = time.perf_counter()
    rank = rank_training_samples(
        model, comp, pool, fit_ids=fit, probe="copy", n_probe=32, half=24, seed=0, batch_size=32, tokens=(1, args.vocab)
    )
    path.write_text(
        json.dumps(
            {
                "scores": rank["scores"].tolist(),
                "component": rank["component"],
                "onset_step": base["onset_step"],
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )
    return rank["scores"]


def summarise(runs: list[dict]) -> dict:
    steps = [r["formation_step"] for r in runs]
    formed = [s for s in steps if s is not None]
    return {
        "formation_steps": steps,
        "formed": f"{len(formed)}/{len(steps)}",
        "formation_mean": statistics.mean(formed) if formed else None,
        "formation_sd": statistics.stdev(formed) if len(formed) > 1 else None,
        "final_pm": [round(r["final_pm"], 3) for r in runs],
        "final_prev": [round(r["final_prev"], 3) for r in runs],
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/work/runs/attr/induction")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--pool", type=int, default=2048)
    p.add_argument("--rep-frac", type=float, default=1.0)
    p.add_argument("--k-frac", type=float, default=0.2)
    p.add_argument("--steps", type=int, default=2400)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--threshold", type=float, default=0.3)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument(
        "--only-seed",
        type=int,
        default=None,
        help="run only this seed's arms (parallel processes: seed 0 makes the ranking, others wait for it)",
    )
    p.add_argument(
        "--only-arm", choices=ARMS, default=None, help="with --only-seed: run just this arm (needs ranking.json)"
    )
    p.add_argument("--quick", action="store_true", help="tiny pool and few steps (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.pool, args.steps, args.eval_every, args.seeds = 128, 40, 20, 1
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spans_of: list = []
    pool, has = build_pool(args.pool, args.vocab, args.rep_frac, seed=0, lengths=spans_of)
    span_len = torch.zeros(len(pool))
    for i, n in spans_of:
        span_len[i] = n
    if args.only_seed not in (None, 0):
        run_arm(args, out, pool, "baseline", args.only_seed, [])
        while not (out / "ranking.json").exists():  # seed 0's process writes it
            time.sleep(10)
    base0 = run_arm(args, out, pool, "baseline", 0, [])
    scores = ranking(args, out, pool, base0)
    k = int(round(args.k_frac * len(pool)))
    order = torch.argsort(scores, descending=True)
    removals = {
        "baseline": [],
        "remove_top": order[:k].tolist(),
        "remove_bottom": order[-k:].tolist(),
        "remove_random": torch.randperm(len(pool), generator=torch.Generator().manual_seed(7))[:k].tolist(),
    }
    enrichment = {arm: float(has[torch.tensor(rows)].float().mean()) for arm, rows in removals.items() if rows}
    print("share of repeat-holding rows among removed:", enrichment, "base rate", float(has.float().mean()), flush=True)
    if args.only_seed is not None:
        for arm in [args.only_arm] if args.only_arm else ARMS:
            run_arm(args, out, pool, arm, args.only_seed, removals[arm])
        return {}
    table = {}
    for arm in ARMS:
        runs = [run_arm(args, out, pool, arm, s, removals[arm]) for s in range(args.seeds)]
        table[arm] = summarise(runs)
    from scipy.stats import spearmanr

    result = {
        "args": vars(args),
        "k": k,
        "removed_mean_span_length": {arm: float(span_len[torch.tensor(r)].mean()) for arm, r in removals.items() if r},
        "pool_mean_span_length": float(span_len.mean()),
        "spearman_score_vs_span_length": float(spearmanr(scores.numpy(), span_len.numpy()).statistic),
        "ranking_seconds": json.loads((out / "ranking.json").read_text())["seconds"],
        "target": f"L1H{base0['target_head']}",
        "onset_step": base0["onset_step"],
        "pool": "rows with a repeated span" if args.rep_frac >= 1 else f"{args.rep_frac:.0%} rows with a repeated span",
        "repeat_share_removed": enrichment,
        "repeat_base_rate": float(has.float().mean()),
        "arms": table,
    }
    (out / "result.json").write_text(json.dumps(result, indent=1))
    for arm, row in table.items():
        print(f"{arm:14s} formed {row['formed']} steps {row['formation_steps']} final pm {row['final_pm']}", flush=True)
    return result


if __name__ == "__main__":
    main()
