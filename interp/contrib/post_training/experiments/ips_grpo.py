"""IPS-GRPO demo: GRPO vs inverse-probability-scaled GRPO on a multimodal bandit and on a tiny policy that
answers a verifiable task with many correct answers.

    python -m interp.contrib.post_training.experiments.ips_grpo [--seeds 3] [--quick]

Bandit (catalog): softmax policy over 8 outcomes, r = [1, 1, 0.9, 0.8, 0.05 x 4], groups of 16, 3,000 SGD
steps (lr 0.05). Metrics: KL(π∝r || π), entropy (target 1.585), high-reward outcomes (r >= 0.8) holding >= 5%.

Verifiable task: prompt s in 4..14, answer a pair of digits (a, b), reward 1 iff a + b = s (2-10 correct
answers per prompt); MLP policy (one-hot -> 32 tanh -> 100), groups of 16 per prompt, 300 Adam steps.
Metrics: accuracy (mass on correct answers), entropy within the correct answers / log(#correct),
correct answers holding >= 5% of the correct mass, and the share of the output layer's weight update in
its top singular direction (what changes inside the model).

Strong baseline (issue 42): GRPO with an entropy bonus -β H(π) in the loss, the first fix a referee tries
against collapse. β is tuned on a grid with 3 separate tuning seeds (100-102), never the reported ones:
on the bandit the β with the lowest KL to π∝r (the claim's target); on the sums task the β covering the
most correct answers among those whose accuracy is at least IPS's on the same tuning seeds (an
equal-accuracy comparison). The chosen β is then run on the reported seeds as a row of each table, and
its paired difference to IPS printed.
"""

from __future__ import annotations

import json

import torch

from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.post_training.ips_grpo import (
    METHODS,
    SumPolicy,
    answer_diversity,
    coverage,
    entropy,
    kl,
    target_distribution,
    train_bandit,
    train_sum_policy,
    update_concentration,
)
from interp.contrib.report import fmt, markdown_table

REWARDS = torch.tensor([1.0, 1.0, 0.9, 0.8, 0.05, 0.05, 0.05, 0.05])
BANDIT_BETAS = (0.1, 0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
TASK_BETAS = (0.03, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0)
TUNE_SEEDS = (100, 101, 102)
ENT = "grpo + entropy bonus"


def tune_bandit_beta(steps: int, betas=BANDIT_BETAS, tune_seeds=TUNE_SEEDS) -> tuple[float, dict[float, float]]:
    """The entropy coefficient with the lowest mean KL(π∝r ‖ π) on the tuning seeds, and every β's KL."""
    target = target_distribution(REWARDS)
    kls = {
        b: sum(kl(target, train_bandit(REWARDS, "grpo", steps=steps, seed=s, entropy_coef=b)) for s in tune_seeds)
        / len(tune_seeds)
        for b in betas
    }
    return min(kls, key=kls.get), kls


def tune_task_beta(
    sums: torch.Tensor, steps: int, betas=TASK_BETAS, tune_seeds=TUNE_SEEDS
) -> tuple[float, float, dict[float, dict[str, float]]]:
    """Equal-accuracy tuning on the sums task: (β covering the most correct answers among those whose mean
    accuracy on the tuning seeds is at least IPS's there (the smallest β if none is), IPS's tuning
    accuracy, each β's mean accuracy and coverage)."""
    mean = lambda rows, k: sum(r[k] for r in rows) / len(rows)  # noqa: E731
    ips = [answer_diversity(train_sum_policy("ips", sums, steps=steps, seed=s)[0], sums) for s in tune_seeds]
    floor = mean(ips, "accuracy")
    grid = {}
    for b in betas:
        rows = [
            answer_diversity(train_sum_policy("grpo", sums, steps=steps, seed=s, entropy_coef=b)[0], sums)
            for s in tune_seeds
        ]
        grid[b] = {"accuracy": mean(rows, "accuracy"), "modes_covered": mean(rows, "modes_covered")}
    ok = [b for b in betas if grid[b]["accuracy"] >= floor]
    best = max(ok, key=lambda b: grid[b]["modes_covered"]) if ok else min(betas)
    return best, floor, grid


def paired_rows(res: dict, keys: tuple[str, ...], a: str = ENT, b: str = "ips") -> list[list[str]]:
    """[metric, a - b paired by seed (mean ± sd), seeds where a > b] for each key."""
    out = []
    for k in keys:
        d = [x - y for x, y in zip(res[a][k], res[b][k], strict=True)]
        out.append([k, fmt(d), f"{sum(x > 0 for x in d)}/{len(d)}"])
    return out


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, quick="1 seed, 300 bandit steps, 30 policy steps")
    a = parse(ap, argv)
    if a.seeds < 1:
        ap.error("--seeds must be positive")
    seeds = 1 if a.quick else a.seeds
    bandit_steps, policy_steps = (300, 30) if a.quick else (3000, 300)
    target = target_distribution(REWARDS)
    beta_b, grid_b = tune_bandit_beta(bandit_steps)
    bandit = {}
    for m in (*METHODS, ENT):
        ps = [
            train_bandit(
                REWARDS, "grpo" if m == ENT else m, steps=bandit_steps, seed=s, entropy_coef=beta_b * (m == ENT)
            )
            for s in range(seeds)
        ]
        bandit[m] = {
            "kl": [kl(target, p) for p in ps],
            "entropy": [entropy(p) for p in ps],
            "covered": [coverage(p, REWARDS, 0.8) for p in ps],
            "mean_reward": [float(p.double() @ REWARDS.double()) for p in ps],
        }
    print(f"bandit, r = {REWARDS.tolist()}: {bandit_steps} steps, {seeds} seeds (target entropy {entropy(target):.3f})")
    print(
        markdown_table(
            ["method", "KL(π∝r ‖ π)", "entropy", "modes r>=0.8 covered (of 4)", "mean reward"],
            [
                [m, fmt(v["kl"]), fmt(v["entropy"]), fmt(v["covered"], 2), fmt(v["mean_reward"])]
                for m, v in bandit.items()
            ],
        )
    )
    print(
        f"{ENT}: β = {beta_b} (lowest KL on tuning seeds {list(TUNE_SEEDS)}; grid "
        + ", ".join(f"{b}: {v:.3f}" for b, v in grid_b.items())
        + ")"
    )
    print(
        markdown_table(
            [f"metric ({ENT} - ips)", "paired by seed", f"{ENT} higher"],
            paired_rows(bandit, ("kl", "covered", "mean_reward")),
        )
    )
    sums = torch.arange(4, 15)
    beta_t, floor_t, grid_t = tune_task_beta(sums, policy_steps)
    task = {}
    for m in ("grpo", "ips", "ips-group", "ips-adv", ENT):  # ips-adv: the naive variant, the second control
        rows = []
        for s in range(seeds):
            w0 = SumPolicy(len(sums), seed=s).out.weight.detach().clone()
            pol, _ = train_sum_policy(
                "grpo" if m == ENT else m, sums, steps=policy_steps, seed=s, entropy_coef=beta_t * (m == ENT)
            )
            rows.append(
                {**answer_diversity(pol, sums), "update_top1": update_concentration(w0, pol.out.weight.detach())}
            )
        task[m] = {k: [r[k] for r in rows] for k in rows[0]}
    print(f"\nverifiable sums task: {policy_steps} steps, {seeds} seeds")
    print(
        markdown_table(
            ["method", "accuracy", "entropy within correct", "correct answers covered", "ΔW top-1 share"],
            [
                [m, fmt(v["accuracy"]), fmt(v["correct_entropy"]), fmt(v["modes_covered"], 2), fmt(v["update_top1"])]
                for m, v in task.items()
            ],
        )
    )
    print(
        f"{ENT}: β = {beta_t} (most answers covered at tuning accuracy >= IPS's {floor_t:.4f}; grid "
        + ", ".join(f"{b}: {v['accuracy']:.3f}/{v['modes_covered']:.2f}" for b, v in grid_t.items())
        + " as accuracy/covered)"
    )
    print(
        markdown_table(
            [f"metric ({ENT} - ips)", "paired by seed", f"{ENT} higher"],
            paired_rows(task, ("accuracy", "correct_entropy", "modes_covered")),
        )
    )
    tuned = {"bandit_beta": beta_b, "task_beta": beta_t, "task_accuracy_floor": floor_t}
    return json.loads(json.dumps({"bandit": bandit, "task": task, "strong_baseline": tuned}))


if __name__ == "__main__":
    main()
