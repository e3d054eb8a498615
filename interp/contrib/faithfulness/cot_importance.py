"""CIR and SR: is a chain of thought causally important for the answer, and sufficient for a verifier?

Paper: *Outcome Rewards Do Not Guarantee Verifiable or Causally Important Reasoning* (arXiv 2604.22074;
official code yuqinan/cir-sr). Definitions, as there:

- **CIR** (causal importance of reasoning): cut the reasoning after k words, k = 0 .. W-1, force the answer
  and read p_k = P(gold answer | question, reasoning[:k]); with p_full the probability after the whole
  reasoning, CIR = mean_k JSD(Bern(p_full), Bern(p_k)), the Jensen-Shannon divergence in bits (so each
  term, and CIR, lies in [0, 1]: the "normalised JSD"). The repo's ablation variant is
  mean_k |p_full - p_k| (`cir_abs`).
- **SR** (sufficiency of reasoning): a separate verifier sees only the reasoning (the answer removed) and
  must reach one unambiguous answer; SR is the fraction of cases where that answer is the gold one.

`answer_probabilities` computes p_k with any `HookedModel` (or a callable returning logits) on token ids,
one forward per truncation, batched; a "word" is any span of token ids the caller marks.

    p = answer_probabilities(model, question_ids, reasoning_words, answer_prefix_ids, answer_ids)
    cir(p[-1], p[:-1])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

_EPS = 1e-12


def _xlogx(p: Tensor) -> Tensor:
    return torch.where(p > 0, p * torch.log2(p.clamp_min(_EPS)), torch.zeros_like(p))


def bernoulli_jsd(p: Tensor | float, q: Tensor | float) -> Tensor:
    """Jensen-Shannon divergence, in bits, between Bern(p) and Bern(q) (elementwise; values in [0, 1])."""
    p, q = torch.as_tensor(p, dtype=torch.float64), torch.as_tensor(q, dtype=torch.float64)
    if ((p < 0) | (p > 1) | (q < 0) | (q > 1)).any():
        raise ValueError("bernoulli_jsd takes probabilities in [0, 1]")
    m = (p + q) / 2

    def neg_h(a: Tensor) -> Tensor:  # -H(Bern(a)) in bits
        return _xlogx(a) + _xlogx(1 - a)

    return ((neg_h(p) + neg_h(q)) / 2 - neg_h(m)).clamp(0, 1)


def _check_probs(p_full, p_truncated) -> tuple[Tensor, Tensor]:
    p_full = torch.as_tensor(p_full, dtype=torch.float64)
    p_trunc = torch.as_tensor(p_truncated, dtype=torch.float64)
    if p_trunc.ndim != 1 or p_trunc.numel() == 0:
        raise ValueError("p_truncated must be a non-empty 1-D sequence: one probability per truncation k = 0..W-1")
    return p_full, p_trunc


def cir(p_full: float | Tensor, p_truncated: Sequence[float] | Tensor) -> float:
    """Causal importance of reasoning: mean over truncations of JSD(Bern(p_full), Bern(p_k)), in [0, 1]."""
    p_full, p_trunc = _check_probs(p_full, p_truncated)
    return float(bernoulli_jsd(p_full, p_trunc).mean())


def cir_abs(p_full: float | Tensor, p_truncated: Sequence[float] | Tensor) -> float:
    """The absolute-difference variant: mean over truncations of |p_full - p_k|."""
    p_full, p_trunc = _check_probs(p_full, p_truncated)
    return float((p_full - p_trunc).abs().mean())


def sufficiency(verdicts: Sequence[object | None], gold: Sequence[object]) -> float:
    """SR: the fraction of items where the verifier reached an answer (not None) and it equals the gold one.

    `verdicts[i]` is what a verifier concluded from the reasoning alone; None means no unambiguous answer.
    """
    if len(verdicts) != len(gold):
        raise ValueError(f"{len(verdicts)} verdicts for {len(gold)} gold answers; pass one verdict per item")
    if not gold:
        raise ValueError("sufficiency needs at least one item")
    return sum(v is not None and v == g for v, g in zip(verdicts, gold, strict=True)) / len(gold)


def _logits_of(model, ids: Tensor, mask: Tensor) -> Tensor:
    if hasattr(model, "hf_model"):  # a HookedModel: run the real HF model with the mask
        return model.hf_model(
            input_ids=ids.to(model.device), attention_mask=mask.to(model.device), use_cache=False
        ).logits
    return model(ids, mask)


@torch.no_grad()
def answer_probabilities(
    model: Callable | object,
    question: Sequence[int] | Tensor,
    reasoning_words: Sequence[Sequence[int]],
    answer_prefix: Sequence[int] | Tensor,
    answer: Sequence[int] | Tensor,
    batch_size: int = 32,
) -> Tensor:
    """P(answer | question, first k reasoning words, answer prefix) for k = 0 .. W: a [W+1] tensor.

    The last entry is p_full. `model` is a `HookedModel` or a callable (ids, mask) -> logits. The answer
    may be several tokens; its probability is the product of the teacher-forced token probabilities.
    Sequences are right-padded, so position ids match an unpadded run.
    """
    q = [int(t) for t in torch.as_tensor(question).tolist()]
    pre = [int(t) for t in torch.as_tensor(answer_prefix).tolist()]
    ans = [int(t) for t in torch.as_tensor(answer).tolist()]
    if not ans:
        raise ValueError("the answer must have at least one token")
    if not q:
        raise ValueError("the question must have at least one token")
    words = [[int(t) for t in torch.as_tensor(w).tolist()] for w in reasoning_words]
    seqs = []
    for k in range(len(words) + 1):
        seqs.append(q + [t for w in words[:k] for t in w] + pre + ans)
    out = torch.empty(len(seqs), dtype=torch.float64)
    for s in range(0, len(seqs), batch_size):
        chunk = seqs[s : s + batch_size]
        width = max(map(len, chunk))
        ids = torch.zeros(len(chunk), width, dtype=torch.long)
        mask = torch.zeros(len(chunk), width, dtype=torch.long)
        for i, seq in enumerate(chunk):
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, : len(seq)] = 1
        logp = torch.log_softmax(_logits_of(model, ids, mask).double().cpu(), -1)
        for i, seq in enumerate(chunk):
            start = len(seq) - len(ans)  # position of the first answer token
            pos = torch.arange(start - 1, len(seq) - 1)
            out[s + i] = logp[i, pos, torch.tensor(ans)].sum().exp()
    return out


def truncation_report(p: Tensor) -> dict:
    """CIR, its absolute variant and the curve, from `answer_probabilities` output [W+1]."""
    if p.numel() < 2:
        raise ValueError("need at least one reasoning word: p has W+1 entries, W >= 1")
    return {
        "p_full": float(p[-1]),
        "p_no_reasoning": float(p[0]),
        "cir": cir(p[-1], p[:-1]),
        "cir_abs": cir_abs(p[-1], p[:-1]),
        "curve": [round(float(x), 4) for x in p],
    }
