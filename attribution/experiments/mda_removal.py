"""MDA's removal claim, in a design that can decide it: does removing MDA's top rows delay induction-head formation?

    nice -n 10 python -m attribution.experiments.mda_removal --out /work/runs/attr/mda_removal   # resumable
    python -m attribution.experiments.mda_removal --out /tmp/mdar_q --quick                       # seconds

Design (issue 25, item 6; the earlier `induction.py` check could not decide: every row held a repeat, removal
reshuffled every later batch, formation was censored at 2,400 steps with one random set):
- Pool with a *known* teaching subset: `--rep-frac` of the rows hold one planted repeated span (length uniform in
  `--span`, both copies at random offsets, so no positional shortcut); every other row is background, which
  cannot teach induction. `--background` picks it:
  - `uniform` (default): i.i.d. uniform tokens from [1, vocab) after BOS, the background of `induction.py` (where
    a head formed). Chance repeats exist (at vocab 64 and ctx 64 most later tokens occurred before), but the token
    after a repeated token is drawn independently of what followed its earlier occurrence: the induction guess
    is right with probability 1/(vocab-1), exactly chance, so the row's expected loss is minimised by ignoring
    the context and neither induction nor anti-induction lowers it in expectation (no expected gradient towards
    the circuit). Only the planted spans reward induction beyond chance.
  - `no-repeat`: no bigram occurs twice, so the token after an earlier occurrence never comes next; induction is
    always wrong there, which rewards *anti*-induction (a small, learnable loss reduction on every row). With this
    background `full` formed no head in 7 calibration settings (attribution/README.md).
- Removal keeps the batch order: every arm trains on the same sampler stream (`attribution.train.data_stream` of
  the model seed); a removed row's slots are filled by its own fresh background row (never in the pool), so
  every other row is seen at exactly the same step and the batch size never changes. Arms differ only in removed
  rows.
- Model: 2-layer attention-only GPT-NeoX (`induction.new_model`: d `--d-model`, 4 heads, rotary, no MLP),
  vocabulary `--vocab` (token 0 = BOS), context `--ctx`; AdamW `--lr` after a linear `--warmup`.
- Defaults are the calibrated setting (attribution/README.md): uniform background, rep-frac 0.5, spans 20-31,
  lr 3e-3 with 200 warm-up steps; without the warm-up `full` formed in 1 of 3 seeds by step 2,500 (a layer-0
  collapse early in training), with it in seeds 0-2 at steps 600-650, and the oracle in none by step 2,000.
- Formation: first eval where the best layer-1 head's prefix-matching score on `[BOS, r, r]` reaches `--threshold`
  *and* the best layer-0 previous-token score reaches `--prev-min` (a real two-head circuit, not the positional
  shortcut). A run stops `--confirm` evals after formation; a run that has not formed by `--steps` is censored.
- Arms, each for model seeds 0..`--seeds`-1: `full` (whole pool); `mda_top` (the k = `--k-frac` rows with the most
  positive MDA influence, ranked per seed by EK-FAC on the target head's W_Q, W_K at that seed's own onset
  checkpoint, the last eval of its `full` run before formation, copy-target probe); `random_<j>` for j <
  `--random-sets` (k random rows, the same sets for every seed); `repeat_k` (k random rows of the repeat subset:
  what a perfect ranking would remove; `--no-repeat-k` drops it); `oracle` (the whole repeat subset removed).
- Survival analysis of formation time per arm: Kaplan-Meier median, restricted mean up to the horizon, a log-rank
  test against the pooled random arms. Verdict rule: MDA's removal *delays formation beyond the random sets' spread*
  when, in every seed, `mda_top` forms later than every random set of that seed (a censored run counts as later
  than any formed one); the oracle must stay unformed and `full` must form for the design to be able to decide.
Each run is `OUT/<arm>_s<seed>.json` (skipped when present: a killed run resumes); `OUT/result.json` holds the table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from attribution.dra import average_precision
from attribution.experiments.induction import new_model
from attribution.influence import HeadComponent
from attribution.mda import (
    kaplan_meier_median,
    logrank_test,
    prefix_matching_scores,
    previous_token_scores,
    rank_training_samples,
    restricted_mean,
)
from attribution.train import data_stream


# ------------------------------------------------------------------------------------------ data
def no_repeat_row(ctx: int, vocab: int, rng: random.Random) -> list[int]:
    """BOS (0) then tokens from [1, vocab) such that no bigram occurs twice."""
    row, seen = [0], set()
    for _ in range(ctx - 1):
        prev = row[-1]
        nxt = rng.choice([t for t in range(1, vocab) if (prev, t) not in seen])
        seen.add((prev, nxt))
        row.append(nxt)
    return row


def uniform_row(ctx: int, vocab: int, rng: random.Random) -> list[int]:
    """BOS (0) then i.i.d. uniform tokens from [1, vocab): repeats only by chance, continuations independent."""
    return [0] + [rng.randrange(1, vocab) for _ in range(ctx - 1)]


BACKGROUNDS = {"uniform": uniform_row, "no-repeat": no_repeat_row}


def background_row(background: str):
    if background not in BACKGROUNDS:
        raise ValueError(f"unknown background {background!r}; use one of {sorted(BACKGROUNDS)}")
    return BACKGROUNDS[background]


def build_pool(
    n: int,
    ctx: int,
    vocab: int,
    rep_frac: float,
    span: tuple[int, int],
    seed: int,
    kind: str = "span",
    background: str = "uniform",
):
    """(pool [n, ctx], has_repeat [n] 0/1, span_length [n]): a seeded `rep_frac` share of the rows holds a repeat.

    `kind` "span": one span of random length copied once, both copies at random offsets; "periodic": a span of
    random length starting at a random offset and repeated back to back to the end of the row (more tokens that
    induction predicts per row; the period varies per row, so no positional shortcut predicts them).
    `background` ("uniform" or "no-repeat", see the module docstring) is what every row is drawn from before the
    repeats are planted."""
    if not 2 <= span[0] <= span[1] or 2 * span[1] > ctx - 1:
        raise ValueError(f"span {span} must fit twice into the {ctx - 1} tokens after BOS")
    if kind not in ("span", "periodic"):
        raise ValueError(f"unknown repeat kind {kind!r}; use 'span' or 'periodic'")
    row_fn = background_row(background)
    rng = random.Random(seed)
    rows = [row_fn(ctx, vocab, rng) for _ in range(n)]
    has = torch.zeros(n, dtype=torch.long)
    lengths = torch.zeros(n, dtype=torch.long)
    for i in sorted(rng.sample(range(n), int(round(rep_frac * n)))):
        length = rng.randint(*span)
        a = rng.randint(1, ctx - 2 * length)
        if kind == "span":
            b = rng.randint(a + length, ctx - length)
            rows[i][b : b + length] = rows[i][a : a + length]
        else:
            for t in range(a + length, ctx):
                rows[i][t] = rows[i][t - length]
        has[i], lengths[i] = 1, length
    return torch.tensor(rows), has, lengths


def fillers(n: int, ctx: int, vocab: int, seed: int, background: str = "uniform") -> torch.Tensor:
    """One fresh background row per pool index (no planted repeat): what fills a removed row's slots."""
    row_fn = background_row(background)
    rng = random.Random(seed)
    return torch.tensor([row_fn(ctx, vocab, rng) for _ in range(n)])


def arm_pool(pool: torch.Tensor, filler: torch.Tensor, removed: list[int]) -> torch.Tensor:
    """The pool with the removed rows' contents replaced by their filler rows (same indices, same stream)."""
    out = pool.clone()
    if removed:
        idx = torch.tensor(sorted(set(removed)))
        out[idx] = filler[idx]
    return out


# ------------------------------------------------------------------------------------------ training
def head_scores(model, ctx: int, vocab: int) -> dict:
    half = (ctx - 1) // 2
    return {
        "pm": prefix_matching_scores(model, n=16, half=half, seed=123, tokens=(1, vocab)).tolist(),
        "prev": previous_token_scores(model, n=16, length=ctx, seed=123, tokens=(1, vocab)).tolist(),
    }


def train_run(args, pool: torch.Tensor, seed: int, keep_states: bool = False) -> tuple[dict, dict]:
    """Train one run on `pool` with the seed's init and stream; returns (result, {step: state} if keep_states)."""
    model = new_model(SimpleNamespace(d_model=args.d_model, vocab=args.vocab), seed)
    hf = model.hf_model
    stream = data_stream(len(pool), args.steps * args.batch, seed)
    opt = torch.optim.AdamW(hf.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    warm = getattr(args, "warmup", 0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
    curve, states, losses, formed = [], {}, [], None
    t0 = time.perf_counter()

    def evaluate(step):
        hf.eval()
        s = head_scores(model, args.ctx, args.vocab)
        hf.train()
        pm, prev = torch.tensor(s["pm"][1]), torch.tensor(s["prev"][0])
        curve.append({"step": step, "pm": float(pm.max()), "head": int(pm.argmax()), "prev": float(prev.max())})
        if keep_states:
            states[step] = {k: v.detach().clone() for k, v in hf.state_dict().items()}

    hf.train()
    evaluate(0)
    step = 0
    for step in range(1, args.steps + 1):
        batch = pool[stream[(step - 1) * args.batch : step * args.batch]]
        loss = hf(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if step % args.eval_every == 0:
            evaluate(step)
            c = curve[-1]
            if args.verbose:
                print(f"  step {step}: layer-1 pm {c['pm']:.3f}, layer-0 prev {c['prev']:.3f}", flush=True)
            if formed is None and c["pm"] >= args.threshold and c["prev"] >= args.prev_min:
                formed = step
            if formed is not None and step >= formed + args.confirm * args.eval_every:
                break
    hf.eval()
    after = [c["pm"] for c in curve if formed is not None and c["step"] >= formed]
    res = {
        "seed": seed,
        "formation_step": formed,
        "censored": formed is None,
        "stopped_at": step,
        "held_after_formation": bool(after) and min(after) >= args.threshold,
        "final_pm": curve[-1]["pm"],
        "final_prev": curve[-1]["prev"],
        "prev_at_formation": next((c["prev"] for c in curve if c["step"] == formed), None),
        "target_head": curve[-1]["head"],
        "final_loss": statistics.mean(losses[-20:]) if losses else None,
        "curve": curve,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    return res, states


def run_arm(args, out: Path, pool, filler, arm: str, seed: int, removed: list[int], keep_onset: bool = False) -> dict:
    """One arm and seed (or its finished result); the `full` runs keep their onset checkpoint for the ranking."""
    path = out / f"{arm}_s{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    res, states = train_run(args, arm_pool(pool, filler, removed), seed, keep_states=keep_onset)
    res |= {"arm": arm, "removed": len(removed)}
    if keep_onset:
        from safetensors.torch import save_file

        formed = res["formation_step"]
        before = [c["step"] for c in res["curve"] if c["step"] > 0 and (formed is None or c["step"] < formed)]
        onset = before[-1] if before else res["curve"][-1]["step"]
        save_file(states[onset], str(out / f"onset_s{seed}.safetensors"))
        res |= {"onset_step": onset, "onset_head": next(c["head"] for c in res["curve"] if c["step"] == onset)}
    path.write_text(json.dumps(res))
    print(
        f"{arm:>9s} seed {seed}: formed {res['formation_step']} (stopped {res['stopped_at']}), pm {res['final_pm']:.3f}"
        f" prev {res['final_prev']:.3f} ({res['seconds']} s)",
        flush=True,
    )
    return res


def ranking(args, out: Path, pool, seed: int, full: dict) -> torch.Tensor:
    """MDA scores of every pool row at seed `seed`'s onset checkpoint (cached in OUT/ranking_s<seed>.json).

    The target head is the layer-1 head that forms in that run (the best one at its last eval)."""
    path = out / f"ranking_s{seed}.json"
    if path.exists():
        return torch.tensor(json.loads(path.read_text())["scores"])
    from safetensors.torch import load_file

    model = new_model(SimpleNamespace(d_model=args.d_model, vocab=args.vocab), seed)
    model.hf_model.load_state_dict(load_file(str(out / f"onset_s{seed}.safetensors")))
    comp = HeadComponent(1, full["target_head"], "qk")
    fit = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))[: args.fit_rows]]
    t0 = time.perf_counter()
    rank = rank_training_samples(
        model,
        comp,
        pool,
        fit_ids=fit,
        probe="copy",
        n_probe=32,
        half=(args.ctx - 1) // 2,
        seed=seed,
        batch_size=32,
        tokens=(1, args.vocab),
    )
    path.write_text(
        json.dumps(
            {
                "scores": rank["scores"].tolist(),
                "component": rank["component"],
                "onset_step": full["onset_step"],
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )
    return rank["scores"]


# ------------------------------------------------------------------------------------------ analysis
def survival(runs: list[dict], horizon: int) -> dict:
    times = [r["formation_step"] if r["formation_step"] is not None else horizon for r in runs]
    events = [r["formation_step"] is not None for r in runs]
    return {
        "formation_steps": [r["formation_step"] for r in runs],
        "formed": f"{sum(events)}/{len(runs)}",
        "km_median": kaplan_meier_median(times, events),
        "restricted_mean": round(restricted_mean(times, events, horizon), 1),
        "final_pm": [round(r["final_pm"], 3) for r in runs],
        "prev_at_formation": [
            None if r["prev_at_formation"] is None else round(r["prev_at_formation"], 3) for r in runs
        ],
    }


def later(a: int | None, b: int | None) -> bool:
    """Formation step a strictly later than b, a censored run (None) being later than any formed one."""
    if a is None:
        return b is not None
    return b is not None and a > b


def verdict(runs: dict[str, list[dict]], seeds: list[int], random_arms: list[str], horizon: int) -> dict:
    step = {arm: {r["seed"]: r["formation_step"] for r in rs} for arm, rs in runs.items()}
    per_seed = {s: all(later(step["mda_top"][s], step[a][s]) for a in random_arms) for s in seeds}
    pooled = [r for a in random_arms for r in runs[a]]

    def te(rs):
        return ([r["formation_step"] or horizon for r in rs], [r["formation_step"] is not None for r in rs])

    lr = logrank_test(*te(runs["mda_top"]), *te(pooled))
    decidable = all(step["full"][s] is not None for s in seeds) and all(step["oracle"][s] is None for s in seeds)
    delayed = all(per_seed.values())
    text = (
        "design cannot decide (full did not form in every seed, or the oracle formed)"
        if not decidable
        else "MDA's top set delays formation beyond the random sets' spread in every seed"
        if delayed
        else "MDA's top set does not delay formation beyond the random sets' spread"
    )
    return {
        "decidable": decidable,
        "mda_later_than_every_random_set": per_seed,
        "delayed": decidable and delayed,
        "logrank_mda_vs_random": lr,
        "text": text,
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/work/runs/attr/mda_removal")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--pool", type=int, default=4096)
    p.add_argument("--rep-frac", type=float, default=0.5, help="share of the pool holding a repeat (the oracle set)")
    p.add_argument("--span", type=int, nargs=2, default=(20, 31), metavar=("MIN", "MAX"))
    p.add_argument("--repeat", choices=("span", "periodic"), default="span", help="how a repeat row repeats")
    p.add_argument(
        "--background",
        choices=sorted(BACKGROUNDS),
        default="uniform",
        help="rows without a planted repeat (and fillers): i.i.d. uniform tokens or no repeated bigram",
    )
    p.add_argument("--k-frac", type=float, default=0.2, help="share of the pool removed by mda_top / random / repeat_k")
    p.add_argument("--steps", type=int, default=2000, help="horizon: runs not formed by then are censored")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=200, help="linear learning-rate warm-up steps")
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--threshold", type=float, default=0.3)
    p.add_argument("--prev-min", type=float, default=0.2)
    p.add_argument("--confirm", type=int, default=2, help="evals after formation before a run stops")
    p.add_argument("--fit-rows", type=int, default=256, help="pool rows the EK-FAC factors are fitted on")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--random-sets", type=int, default=3)
    p.add_argument("--no-repeat-k", action="store_true", help="skip the repeat_k arm (k rows of the repeat subset)")
    p.add_argument("--arms", nargs="*", default=None, help="run only these arms (full is always run first)")
    p.add_argument("--verbose", action="store_true", help="print every eval")
    p.add_argument("--quick", action="store_true", help="tiny pool, few steps, one seed and random set (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.pool, args.ctx, args.span, args.steps, args.eval_every, args.warmup = 64, 16, (3, 6), 20, 10, 0
        args.seeds, args.random_sets, args.fit_rows = 1, 1, 32
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pool, has, span_len = build_pool(
        args.pool, args.ctx, args.vocab, args.rep_frac, tuple(args.span), 0, args.repeat, args.background
    )
    filler = fillers(args.pool, args.ctx, args.vocab, seed=1, background=args.background)
    k = int(round(args.k_frac * args.pool))
    repeat_rows = torch.nonzero(has).flatten().tolist()
    random_sets = {
        f"random_{j}": torch.randperm(args.pool, generator=torch.Generator().manual_seed(100 + j))[:k].tolist()
        for j in range(args.random_sets)
    }
    fixed = dict(random_sets)
    if not args.no_repeat_k:
        fixed["repeat_k"] = random.Random(7).sample(repeat_rows, min(k, len(repeat_rows)))
    fixed["oracle"] = repeat_rows
    arms = ["full", "mda_top", *fixed]
    if args.arms:
        arms = ["full", *[a for a in arms if a in args.arms and a != "full"]]
    runs: dict[str, list[dict]] = {a: [] for a in arms}
    ranks: dict[int, dict] = {}
    for seed in range(args.seeds):
        full = run_arm(args, out, pool, filler, "full", seed, [], keep_onset=True)
        runs["full"].append(full)
        if "mda_top" in arms:
            scores = ranking(args, out, pool, seed, full)
            top = torch.argsort(scores, descending=True)[:k].tolist()
            ranks[seed] = {
                "onset_step": full["onset_step"],
                "head": f"L1H{full['target_head']}",
                "top_repeat_share": float(has[top].float().mean()),
                "auprc_repeat": round(average_precision(scores, has), 3),
                "top_mean_span": float(span_len[top].float().mean()),
            }
            print(f"ranking seed {seed}: {ranks[seed]}", flush=True)
            runs["mda_top"].append(run_arm(args, out, pool, filler, "mda_top", seed, top))
        for arm in arms:
            if arm in fixed:
                runs[arm].append(run_arm(args, out, pool, filler, arm, seed, fixed[arm]))
    table = {arm: survival(rs, args.steps) for arm, rs in runs.items()}
    random_arms = [a for a in arms if a.startswith("random_")]
    result = {
        "args": vars(args),
        "k": k,
        "repeat_rows": len(repeat_rows),
        "repeat_share_removed": {a: float(has[torch.tensor(r)].float().mean()) for a, r in fixed.items() if r},
        "rankings": ranks,
        "arms": table,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if {"mda_top", "oracle"} <= set(arms) and random_arms:
        result["verdict"] = verdict(runs, list(range(args.seeds)), random_arms, args.steps)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    for arm, row in table.items():
        print(
            f"{arm:>9s} formed {row['formed']} steps {row['formation_steps']} KM median {row['km_median']}"
            f" restricted mean {row['restricted_mean']}",
            flush=True,
        )
    if "verdict" in result:
        print("verdict:", result["verdict"]["text"], flush=True)
    return result


if __name__ == "__main__":
    main()
