"""IPS-GRPO: inverse probability scaling of the learning signal against outcome-level mode collapse.

Paper: *Expected Return Causes Outcome-Level Mode Collapse in RL and How to Fix It with Inverse Probability
Scaling* (arXiv 2601.21669; Sinha, Elango, Liu). No official code. The argument: the expected-return
gradient Σ_o π(o) r(o) ∇log π(o) carries the probability π(o) as a multiplier, so the log-ratio of two
outcomes drifts linearly in their reward difference and the policy collapses onto one mode even when
several are equally good. Dividing each sampled outcome's signal by π̂(o) removes the multiplier: the
expected update becomes Σ_o r(o) ∇log π(o), whose fixed point under a softmax policy is π ∝ r.

Per-sample weights w_i of the surrogate loss -mean_i w_i log π(o_i) (a group of G samples of one prompt):

    "grpo"        w_i = (r_i - mean r) / (std r + eps)             (standard GRPO advantage)
    "ips"         w_i = r_i / π(o_i)                               (IPS on the raw reward; π detached)
    "ips-group"   w_i = r_i / (count of o_i in the group / G)      (the empirical-frequency estimate)
    "ips-adv"     w_i = (r_i - mean r)/(std r + eps) / π(o_i)       (naive: the normalised advantage / π)

The paper's exact estimator inside GRPO is not public; "ips" is the form whose fixed point is π ∝ r
(tested), and the catalog's numpy check found "ips-adv" collapses, so both are measured. A constant
baseline b does not vanish under IPS (E[b/π ∇log π] = b Σ_o ∇log π(o) ≠ 0), which is why the raw reward
is scaled, not the centred advantage.

Strong baseline (issue 42): `entropy_coef` of `train_bandit` / `train_sum_policy` adds an entropy bonus
-β H(π) to any method's loss; GRPO with it (fixed point π ∝ exp(r/β) for the plain expected return) is what a
referee tries first against collapse.

    w = sample_weights(rewards, probs_of_samples, "ips", outcomes)     # [G]
    loss = -(w * logp_of_samples).mean()
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

Method = Literal["grpo", "ips", "ips-group", "ips-adv"]
METHODS: tuple[str, ...] = ("grpo", "ips", "ips-group", "ips-adv")


def grpo_advantages(rewards: Tensor, eps: float = 1e-6) -> Tensor:
    """GRPO's group-normalised advantage (r - mean) / (std + eps) over the last axis (a group)."""
    if rewards.numel() == 0 or rewards.shape[-1] < 2:
        raise ValueError(f"a GRPO group needs at least 2 samples; got rewards of shape {tuple(rewards.shape)}")
    return (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + eps)


def group_frequency(outcomes: Tensor) -> Tensor:
    """Empirical frequency of each sample's outcome within its group (last axis): [..., G]."""
    eq = outcomes.unsqueeze(-1) == outcomes.unsqueeze(-2)
    return eq.float().mean(-1)


def sample_weights(rewards: Tensor, probs: Tensor, method: str, outcomes: Tensor | None = None) -> Tensor:
    """Per-sample learning-signal weights w_i (see the module docstring); rewards, probs: [..., G].

    probs are the policy probabilities of the sampled outcomes (detached here); outcomes (ids) are needed
    for "ips-group" only.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if rewards.shape != probs.shape:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} and probs {tuple(probs.shape)} must have the same [..., G] shape"
        )
    if method in ("ips", "ips-adv") and bool((probs <= 0).any()):
        raise ValueError("inverse probability scaling needs every sampled outcome's probability > 0")
    if method in ("ips", "ips-group") and bool((rewards < 0).any()):
        raise ValueError("IPS scales the raw reward and needs rewards >= 0 (its fixed point is π ∝ r)")
    p = probs.detach()
    if method == "grpo":
        return grpo_advantages(rewards)
    if method == "ips":
        return rewards / p
    if method == "ips-adv":
        return grpo_advantages(rewards) / p
    if outcomes is None or outcomes.shape != rewards.shape:
        raise ValueError("method 'ips-group' needs the sampled outcome ids, same shape as rewards")
    return rewards / group_frequency(outcomes)


def expected_update(logits: Tensor, rewards: Tensor, method: str) -> Tensor:
    """The exact expected logit update E[w ∇log π(o)] of a softmax policy for "grpo"-free methods
    (single outcome, no group): "ips" gives Σ_o r(o)(e_o - π), plain expected return Σ_o π(o) r(o)(e_o - π).
    `method` is "ips" or "return". Used by tests to check the fixed points in closed form."""
    p = torch.softmax(logits.double(), -1)
    r = rewards.double()
    eye = torch.eye(len(p), dtype=torch.float64)
    coef = r if method == "ips" else p * r if method == "return" else None
    if coef is None:
        raise ValueError(f"expected_update knows 'ips' and 'return'; got {method!r}")
    return (coef.unsqueeze(1) * (eye - p)).sum(0)


# ------------------------------------------------------------------------------------------- metrics
def entropy(p: Tensor) -> float:
    """Shannon entropy (nats) of a distribution."""
    q = p[p > 0].double()
    return float(-(q * q.log()).sum())


def kl(p: Tensor, q: Tensor) -> float:
    """KL(p || q) in nats (q clamped at 1e-12)."""
    m = p > 0
    return float((p[m].double() * (p[m].double().log() - q[m].double().clamp_min(1e-12).log())).sum())


def coverage(p: Tensor, rewards: Tensor, good: float, min_mass: float = 0.05) -> int:
    """How many outcomes with reward >= `good` the policy puts at least `min_mass` on."""
    return int(((rewards >= good) & (p >= min_mass)).sum())


def train_bandit(
    rewards: Tensor,
    method: str,
    group: int = 16,
    steps: int = 3000,
    lr: float = 0.05,
    seed: int = 0,
    entropy_coef: float = 0.0,
) -> Tensor:
    """Train a softmax policy over len(rewards) terminal outcomes (logits start at 0) with GRPO-style
    groups of `group` samples and SGD on -mean_i w_i log π(o_i) - entropy_coef H(π) (the entropy bonus of
    the strong baseline, exact over the outcomes; 0 = none); returns the final distribution."""
    if group < 2 or steps < 0 or lr <= 0 or entropy_coef < 0:
        raise ValueError(
            f"need group >= 2, steps >= 0, lr > 0, entropy_coef >= 0; got {group}, {steps}, {lr}, {entropy_coef}"
        )
    g = torch.Generator().manual_seed(seed)
    theta = torch.zeros(len(rewards), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([theta], lr=lr)
    r_all = rewards.double()
    # own loop, not common.fit: each step's samples are rolled out from the current policy (on-policy RL)
    for _ in range(steps):
        logp = torch.log_softmax(theta, -1)
        o = torch.multinomial(logp.exp().detach(), group, replacement=True, generator=g)
        w = sample_weights(r_all[o], logp.exp()[o], method, o)
        if not torch.isfinite(w).all():
            break
        loss = -(w * logp[o]).mean() + entropy_coef * (logp.exp() * logp).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.softmax(theta.detach(), -1)


def target_distribution(rewards: Tensor) -> Tensor:
    """π ∝ r, the IPS fixed point."""
    if bool((rewards < 0).any()) or float(rewards.sum()) <= 0:
        raise ValueError("rewards must be non-negative with a positive sum")
    return rewards.double() / rewards.double().sum()


def max_entropy_of(rewards: Tensor) -> float:
    return math.log(len(rewards))


# ------------------------------------------------------------------ a tiny policy on a verifiable task
class SumPolicy(torch.nn.Module):
    """A prompt-conditioned policy: prompt s (one-hot) -> MLP -> logits over the n² answers (a, b).
    An answer is correct (reward 1) iff a + b = s, so each prompt has several equally good outcomes."""

    def __init__(self, n_prompts: int, n_digits: int = 10, hidden: int = 32, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.n_digits = n_digits
        self.inp = torch.nn.Linear(n_prompts, hidden)
        self.out = torch.nn.Linear(hidden, n_digits * n_digits)

    def hidden(self, prompts: Tensor) -> Tensor:
        return torch.tanh(self.inp(torch.nn.functional.one_hot(prompts, self.inp.in_features).float()))

    def forward(self, prompts: Tensor) -> Tensor:
        return self.out(self.hidden(prompts))


def sum_rewards(sums: Tensor, n_digits: int = 10) -> Tensor:
    """[len(sums), n²] rewards: 1 where a + b = s."""
    a = torch.arange(n_digits).repeat_interleave(n_digits)
    b = torch.arange(n_digits).repeat(n_digits)
    return ((a + b).unsqueeze(0) == sums.unsqueeze(1)).float()


def train_sum_policy(
    method: str,
    sums: Tensor,
    group: int = 16,
    steps: int = 400,
    lr: float = 0.05,
    seed: int = 0,
    ips_floor: float = 1e-3,
    entropy_coef: float = 0.0,
) -> tuple[SumPolicy, Tensor]:
    """Train SumPolicy with groups of `group` answers per prompt (every prompt each step, Adam).
    π in the IPS weights is floored at `ips_floor` (a rare sample would otherwise get a weight of 1/π ~ 1e4
    and one Adam step would blow the logits up; our safeguard, reported). `entropy_coef` adds the strong
    baseline's entropy bonus -entropy_coef H(π(·|s)) (exact over the answers, mean over prompts; 0 = none).
    Returns (policy, rewards table)."""
    if entropy_coef < 0:
        raise ValueError(f"entropy_coef must be >= 0; got {entropy_coef}")
    pol = SumPolicy(int(sums.numel()), seed=seed)
    table = sum_rewards(sums)
    opt = torch.optim.Adam(pol.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    prompts = torch.arange(len(sums))
    # own loop, not common.fit: each step's answers are rolled out from the current policy (on-policy RL)
    for _ in range(steps):
        logp = torch.log_softmax(pol(prompts), -1)  # [P, A]
        o = torch.multinomial(logp.exp().detach(), group, replacement=True, generator=g)  # [P, G]
        lp = logp.gather(1, o)
        r = table.gather(1, o)
        w = sample_weights(r, lp.exp().clamp_min(ips_floor), method, o)
        loss = -(w * lp).mean() + entropy_coef * (logp.exp() * logp).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return pol, table


def answer_diversity(pol: SumPolicy, sums: Tensor) -> dict[str, float]:
    """accuracy (mass on correct answers), mean entropy of the policy *within* the correct answers divided
    by log(#correct) (1 = all correct answers equally likely, 0 = one), and mean #correct answers holding
    at least 5% of the correct mass, averaged over prompts."""
    with torch.no_grad():
        p = torch.softmax(pol(torch.arange(len(sums))), -1)
    table = sum_rewards(sums)
    acc, ent, cov = [], [], []
    for i in range(len(sums)):
        c = p[i][table[i] > 0]
        acc.append(float(c.sum()))
        q = c / c.sum()
        ent.append(entropy(q) / math.log(len(q)) if len(q) > 1 else 1.0)
        cov.append(float((q >= 0.05).sum()))
    n = len(sums)
    return {"accuracy": sum(acc) / n, "correct_entropy": sum(ent) / n, "modes_covered": sum(cov) / n}


def update_concentration(before: Tensor, after: Tensor) -> float:
    """Share of the weight update's energy |ΔW|²_F in its top singular direction (1 = a rank-one update)."""
    s = torch.linalg.svdvals((after - before).double())
    return float(s[0] ** 2 / (s**2).sum()) if float(s.sum()) > 0 else 0.0
