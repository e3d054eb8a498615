"""MIPO: DPO on (correct-prompt, random-prompt) response pairs, which raises prompt-response mutual information.

Paper: *Maximizing Mutual Information Between Prompt and Response Improves LLM Performance With No
Additional Data* (arXiv 2603.19294; Nam, Li, Jaques; no code found). For each prompt x: y⁺ ~ π_base(·|x),
y⁻ ~ π_base(·|x′) for a random other prompt x′, then DPO on (x, y⁺, y⁻) with π_base as the reference.
In expectation this raises log π(y|x) - log π(y) (pointwise mutual information): responses that are likely
under *any* prompt are pushed down, responses specific to x up. No labels, no verifier.

Here, the policy is a small autoregressive model over a context id and a short response (`ContextPolicy`);
`pmi` measures E_{x, y~π(·|x)}[log π(y|x) - log (1/K) Σ_{x'} π(y|x')] exactly over the K contexts (the
prompt-response mutual information under a uniform prompt), the same quantity the paper estimates
from an LM's logits.

    pairs = mipo_pairs(base, contexts, g)        # (x, y⁺, y⁻)
    loss = dpo_loss(policy.logprob(x, y⁺), policy.logprob(x, y⁻), base.logprob(x, y⁺), base.logprob(x, y⁻))

Strong baseline (issue 42): PMI reweighting of the base model at inference, no training:
π_λ(y|x) ∝ π(y|x) π̄(y)^-λ with π̄(y) = mean_x' π(y|x'), exact over every response (`pmi_reweighted`);
λ = 1 ranks responses by PMI itself (what contrastive decoding / best-of-N by PMI approximate).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class ContextPolicy(nn.Module):
    """π(y | x) for a context id x in [0, K) and a response y of `length` tokens from a vocabulary of `vocab`:
    an MLP on (context embedding, embeddings of the previous tokens) per position (teacher forcing)."""

    def __init__(self, n_contexts: int, vocab: int, length: int, d: int = 32, hidden: int = 64):
        super().__init__()
        self.k, self.vocab, self.length = n_contexts, vocab, length
        self.ctx = nn.Embedding(n_contexts, d)
        self.tok = nn.Embedding(vocab + 1, d)  # id `vocab` = start token
        self.pos = nn.Embedding(length, d)
        self.mlp = nn.Sequential(nn.Linear(3 * d, hidden), nn.GELU(), nn.Linear(hidden, vocab))

    def logits(self, x: Tensor, y: Tensor) -> Tensor:
        """[batch, length, vocab] next-token logits given x [batch] and y [batch, length] (teacher forcing)."""
        prev = torch.cat([torch.full_like(y[:, :1], self.vocab), y[:, :-1]], 1)
        pos = self.pos.weight.unsqueeze(0).expand(len(x), -1, -1)
        ctx = self.ctx(x).unsqueeze(1).expand(-1, self.length, -1)
        return self.mlp(torch.cat([ctx, self.tok(prev), pos], -1))

    def logprob(self, x: Tensor, y: Tensor) -> Tensor:
        """Sequence log-probability log π(y | x): [batch]."""
        lp = torch.log_softmax(self.logits(x, y), -1)
        return lp.gather(2, y.unsqueeze(2)).squeeze(2).sum(1)

    @torch.no_grad()
    def sample(self, x: Tensor, g: torch.Generator, greedy: bool = False) -> Tensor:
        y = torch.zeros(len(x), self.length, dtype=torch.long)
        for t in range(self.length):
            p = torch.softmax(self.logits(x, y)[:, t], -1)
            y[:, t] = p.argmax(-1) if greedy else torch.multinomial(p, 1, generator=g)[:, 0]
        return y


def mipo_pairs(base: ContextPolicy, x: Tensor, g: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """(x, y⁺ ~ base(·|x), y⁻ ~ base(·|x′)) with x′ uniform over the other contexts."""
    if base.k < 2:
        raise ValueError("MIPO needs at least 2 contexts (y⁻ comes from a different prompt)")
    shift = torch.randint(1, base.k, x.shape, generator=g)
    other = (x + shift) % base.k
    return x, base.sample(x, g), base.sample(other, g)


@torch.no_grad()
def pmi(policy: ContextPolicy, n_per_context: int, g: torch.Generator) -> float:
    """Mean of log π(y|x) - log mean_{x'} π(y|x') over y ~ π(·|x), x uniform (exact over the K contexts)."""
    k = policy.k
    x = torch.arange(k).repeat_interleave(n_per_context)
    y = policy.sample(x, g)
    all_lp = torch.stack([policy.logprob(torch.full_like(x, c), y) for c in range(k)], 1)  # [n, K]
    own = all_lp.gather(1, x.unsqueeze(1))[:, 0]
    return float((own - (torch.logsumexp(all_lp, 1) - math.log(k))).mean())


def context_accuracy(policy: ContextPolicy, targets: Tensor) -> float:
    """Mean probability of the context's target response: mean_x π(T(x) | x) (targets [K, length])."""
    with torch.no_grad():
        return float(policy.logprob(torch.arange(policy.k), targets).exp().mean())


def sft_loss(policy: ContextPolicy, x: Tensor, y: Tensor) -> Tensor:
    """The SFT objective: mean negative log-likelihood of the responses y given the contexts x."""
    return -policy.logprob(x, y).mean()


def make_base_data(targets: Tensor, generic: Tensor, p_follow: float, n: int, g: torch.Generator):
    """Pretraining data: context x uniform; response T(x) with prob `p_follow`, else one of the
    context-free `generic` responses (uniform). The base model thus follows its context only partially."""
    k = targets.shape[0]
    x = torch.randint(0, k, (n,), generator=g)
    follow = torch.rand(n, generator=g) < p_follow
    gen = generic[torch.randint(0, len(generic), (n,), generator=g)]
    return x, torch.where(follow.unsqueeze(1), targets[x], gen)


def target_responses(k: int, vocab: int, length: int, g: torch.Generator) -> Tensor:
    """K distinct random responses (one per context)."""
    seen, out = set(), []
    while len(out) < k:
        r = tuple(torch.randint(0, vocab, (length,), generator=g).tolist())
        if r not in seen:
            seen.add(r)
            out.append(r)
    return torch.tensor(out)


def update_share(before: dict[str, Tensor], after: nn.Module, prefix: str) -> float:
    """Share of the squared parameter change in parameters whose name starts with `prefix`."""
    tot, part = 0.0, 0.0
    for name, p in after.named_parameters():
        d = float(((p.detach() - before[name]) ** 2).sum())
        tot += d
        part += d if name.startswith(prefix) else 0.0
    return part / tot if tot > 0 else 0.0


@torch.no_grad()
def cross_logprobs(lm, prompts: Tensor, responses: Tensor, batch: int = 16) -> Tensor:
    """L[i, j] = log π(y_i | x_j): every response under every prompt, from an LM's logits.

    lm: a callable ids [b, pos] -> logits [b, pos, vocab] (an `interp.HookedModel`); prompts [P, Lp] and
    responses [P, Lr] token ids (equal lengths, so no padding enters). PMI_i = L[i, i] - logmeanexp_j L[i, j]
    estimates log π(y_i|x_i) - log π(y_i) with the P prompts as the prompt distribution."""
    if prompts.ndim != 2 or responses.ndim != 2 or len(prompts) != len(responses) or len(prompts) < 2:
        raise ValueError(
            f"prompts [P, Lp] and responses [P, Lr] with the same P >= 2; got {tuple(prompts.shape)}, "
            f"{tuple(responses.shape)}"
        )
    p, lp = prompts.shape
    pairs = [(i, j) for i in range(p) for j in range(p)]
    out = torch.empty(p, p, dtype=torch.float64)
    for s in range(0, len(pairs), batch):
        chunk = pairs[s : s + batch]
        ids = torch.stack([torch.cat([prompts[j], responses[i]]) for i, j in chunk])
        logits = lm(ids).double()
        lsm = torch.log_softmax(logits[:, lp - 1 : -1], -1)
        tok = ids[:, lp:]
        lps = lsm.gather(2, tok.unsqueeze(2).to(lsm.device)).squeeze(2).sum(1)
        for (i, j), v in zip(chunk, lps.tolist()):
            out[i, j] = v
    return out


def pmi_from_cross(cross: Tensor) -> tuple[float, float]:
    """(mean PMI over i, share of responses whose own prompt gives them the highest likelihood)."""
    own = cross.diagonal()
    marg = torch.logsumexp(cross, 1) - math.log(cross.shape[1])
    return float((own - marg).mean()), float((cross.argmax(1) == torch.arange(len(cross))).float().mean())


def all_responses(vocab: int, length: int) -> Tensor:
    """Every response [vocab**length, length] in lexicographic order."""
    if vocab < 1 or length < 1 or vocab**length > 2_000_000:
        raise ValueError(f"need vocab, length >= 1 and vocab**length <= 2e6; got {vocab}, {length}")
    idx = torch.arange(vocab**length)
    return torch.stack([(idx // vocab ** (length - 1 - t)) % vocab for t in range(length)], 1)


@torch.no_grad()
def response_logprobs(policy: ContextPolicy) -> Tensor:
    """log π(y | x) for every context x and every response y: [K, vocab**length] (rows sum to one in prob)."""
    ys = all_responses(policy.vocab, policy.length)
    return torch.stack([policy.logprob(torch.full((len(ys),), c), ys) for c in range(policy.k)])


def pmi_reweighted(logp: Tensor, lam: float) -> Tensor:
    """The strong baseline: log π_λ(y|x) = log π(y|x) - λ log π̄(y) - log Z_x, π̄(y) = mean_x π(y|x).
    logp: [K, Y] exact log-probabilities of every response (`response_logprobs`); λ = 0 returns logp."""
    if lam < 0 or logp.ndim != 2:
        raise ValueError(f"need lam >= 0 and logp [K, Y]; got {lam}, {tuple(logp.shape)}")
    marg = torch.logsumexp(logp, 0) - math.log(len(logp))
    s = logp - lam * marg
    return s - torch.logsumexp(s, 1, keepdim=True)


def table_metrics(logp: Tensor, targets: Tensor, generic: Tensor, g: torch.Generator, n_per_context: int = 32):
    """The experiment's metrics for a policy given as its table log π(y|x) [K, Y] over every response (in
    `all_responses` order): π(T(x)|x), greedy (argmax) accuracy, generic mass, and PMI estimated as `pmi`
    does, from `n_per_context` samples per context."""
    k, n_y = logp.shape
    vocab = int(round(n_y ** (1 / targets.shape[1])))
    code = lambda y: (y * vocab ** torch.arange(y.shape[-1] - 1, -1, -1)).sum(-1)  # noqa: E731
    x = torch.arange(k)
    t_idx, g_idx = code(targets), code(generic)
    y = torch.multinomial(logp.exp(), n_per_context, replacement=True, generator=g)  # [K, n]
    marg = torch.logsumexp(logp, 0) - math.log(k)
    return {
        "π(T|x)": float(logp[x, t_idx].exp().mean()),
        "greedy acc": float((logp.argmax(1) == t_idx).float().mean()),
        "generic mass": float(logp[:, g_idx].exp().sum(1).mean()),
        "PMI": float((logp.gather(1, y) - marg[y]).mean()),
    }
