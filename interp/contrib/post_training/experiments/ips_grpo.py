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


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, quick="1 seed, 300 bandit steps, 30 policy steps")
    a = parse(ap, argv)
    if a.seeds < 1:
        ap.error("--seeds must be positive")
    seeds = 1 if a.quick else a.seeds
    bandit_steps, policy_steps = (300, 30) if a.quick else (3000, 300)
    target = target_distribution(REWARDS)
    bandit = {}
    for m in METHODS:
        ps = [train_bandit(REWARDS, m, steps=bandit_steps, seed=s) for s in range(seeds)]
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
    sums = torch.arange(4, 15)
    task = {}
    for m in ("grpo", "ips", "ips-group", "ips-adv"):  # ips-adv: the naive variant, the second control
        rows = []
        for s in range(seeds):
            w0 = SumPolicy(len(sums), seed=s).out.weight.detach().clone()
            pol, _ = train_sum_policy(m, sums, steps=policy_steps, seed=s)
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
    return json.loads(json.dumps({"bandit": bandit, "task": task}))


if __name__ == "__main__":
    main()
