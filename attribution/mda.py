"""Mechanistic Data Attribution (Chen, Luo, Pan 2026, arXiv 2601.21996): which training samples make a head.

MDA = (monitoring metric mu, component pi, probe f): localise a head with a score (`head_scores`),
restrict influence to its parameters (`attribution.influence.HeadComponent`), and rank training samples
by EK-FAC influence on a probe of the head's function (`rank_training_samples`). The causal check
retrains with the top samples removed / duplicated / the same number of random samples removed and
compares when the head emerges (`emergence_step`) and the in-context-learning score; it takes minutes,
so it lives in `python -m attribution.experiments.mda`.

Scores (no gradients), each [layers, heads] on seeded random tokens:
- previous-token score: `mean_t A[t, t-1]`.
- prefix-matching score (Olsson et al.): on `[BOS, r, r]`, `mean_{i in 2nd copy} A[i, i-n+1]`.
- induction score: the head's causal effect on copying, the mean increase of loss on the second copy's
  tokens when the head's output (`attn.hook_z`) is zeroed. (TransformerLens's detection-pattern score
  is the prefix-matching score divided by the row count, so we report the behavioural one instead.)
- in-context-learning score: loss at a late position minus loss at an early one (Olsson: 500 - 50;
  adapted to short contexts, e.g. 60 - 8); more negative = more ICL.

Probes (differentiable, per example; MDA's `probes/`):
- `copy_target_probe`: `sum_t log p(target_t | t-1)` where target_t follows the last earlier occurrence of
  tokens[t-1] (correct alignment). `legacy_current_match=True` reproduces the released code's key =
  tokens[t] (an off-by-one that scores a two-ahead prediction; see the research spec 2.2).
- `prev_attn_probe`: `sum_t A_h[t, t-1]` (qk mode).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from attribution.influence import HeadComponent, Objective, fit_ekfac, influence_scores, mean_gradient


# ------------------------------------------------------------------------------------------ data
def random_tokens(n: int, length: int, vocab: int, seed: int, low: int = 0) -> Tensor:
    return torch.randint(low, vocab, (n, length), generator=torch.Generator().manual_seed(seed))


def repeated_random(n: int, half: int, vocab: int, seed: int, bos: int | None = 0, low: int = 1) -> Tensor:
    # (vocab is the exclusive upper bound of the token ids drawn; low the inclusive lower bound)
    """`[BOS, r, r]` with r = `half` uniform tokens in [low, vocab) -> [n, 2*half (+1)]."""
    r = random_tokens(n, half, vocab, seed, low)
    seq = torch.cat([r, r], 1)
    return seq if bos is None else torch.cat([torch.full((n, 1), bos), seq], 1)


# ------------------------------------------------------------------------------------------ scores
@torch.no_grad()
def _patterns(model, ids: Tensor) -> Tensor:
    _, cache = model.run_with_cache(ids, names="blocks.*.attn.hook_pattern", return_logits=False, device="cpu")
    return torch.stack([cache[f"blocks.{layer}.attn.hook_pattern"] for layer in range(model.n_layers)])  # [L,b,h,q,k]


def previous_token_scores(model, n: int = 16, length: int = 32, seed: int = 0,
                          tokens: tuple[int, int] | None = None) -> Tensor:
    """[layers, heads] mean attention to the previous token on random tokens.

    `tokens` = (low, high) range of the ids drawn (default: the whole vocabulary). Draw from ids the model
    has seen in training (e.g. printable bytes), or untrained embeddings blur the scores.
    """
    low, high = tokens or (0, model.d_vocab)
    pat = _patterns(model, random_tokens(n, length, high, seed, low))
    return pat.diagonal(offset=-1, dim1=-2, dim2=-1).mean((1, -1))


def prefix_matching_scores(model, n: int = 16, half: int = 24, seed: int = 0, bos: int = 0,
                           tokens: tuple[int, int] | None = None) -> Tensor:
    """[layers, heads] Olsson prefix-matching score on `[BOS, r, r]` (`tokens`: id range, as above)."""
    low, high = tokens or (1, model.d_vocab)
    pat = _patterns(model, repeated_random(n, half, high, seed, bos, low))
    i = torch.arange(half + 1, 2 * half + 1)
    return pat[..., i, i - half + 1].mean((1, -1))


def _second_copy_loss(model, ids: Tensor, half: int, fwd_hooks=()) -> Tensor:
    logits = model.run_with_hooks(ids, fwd_hooks=fwd_hooks)
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none").view(len(ids), -1)
    return ce[:, half + 1:].mean()  # predictions of tokens 2..half of the second copy


@torch.no_grad()
def induction_scores(model, n: int = 16, half: int = 24, seed: int = 0, bos: int = 0,
                     heads: Sequence[tuple[int, int]] | None = None, tokens: tuple[int, int] | None = None) -> Tensor:
    """[layers, heads] increase of second-copy loss when the head's output is zeroed (NaN where not asked)."""
    low, high = tokens or (1, model.d_vocab)
    ids = repeated_random(n, half, high, seed, bos, low).to(model.device)
    base = _second_copy_loss(model, ids, half)
    out = torch.full((model.n_layers, model.n_heads), float("nan"))
    for layer, head in heads or [(l_, h_) for l_ in range(model.n_layers) for h_ in range(model.n_heads)]:
        def zero(z, hook, head=head):
            z = z.clone()
            z[:, :, head] = 0
            return z

        out[layer, head] = _second_copy_loss(model, ids, half, [(f"blocks.{layer}.attn.hook_z", zero)]) - base
    return out


@torch.no_grad()
def icl_score(model, ids: Tensor, early: int = 8, late: int = 60) -> float:
    """Mean loss predicting token `late` minus mean loss predicting token `early` (negative = in-context learning)."""
    if late >= ids.shape[1]:
        raise ValueError(f"late position {late} is outside sequences of length {ids.shape[1]}")
    logits = model(ids.to(model.device))
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].to(logits.device).flatten(), reduction="none")
    ce = ce.view(len(ids), -1)
    return float(ce[:, late - 1].mean() - ce[:, early - 1].mean())


def emergence_step(evals: list[dict], key: str, threshold: float) -> int | None:
    """First logged step at which `evals[i][key]` crosses `threshold` (None if it never does)."""
    for e in evals:
        if e[key] >= threshold:
            return int(e["step"])
    return None


# ------------------------------------------------------------------------------------------ formation times
# Survival analysis of formation times: `times[i]` is the formation step of run i when `events[i]` is true, else the
# step at which it was censored (it had not formed by then).
def kaplan_meier(times: Sequence[float], events: Sequence[bool]) -> list[tuple[float, float]]:
    """[(t, S(t))] at each distinct event time: the Kaplan-Meier probability of not having formed by t."""
    if len(times) != len(events):
        raise ValueError(f"times and events differ in length: {len(times)} vs {len(events)}")
    surv, out = 1.0, []
    for t in sorted({t for t, e in zip(times, events) if e}):
        at_risk = sum(1 for u in times if u >= t)
        formed = sum(1 for u, e in zip(times, events) if e and u == t)
        surv *= 1 - formed / at_risk
        out.append((t, surv))
    return out


def kaplan_meier_median(times: Sequence[float], events: Sequence[bool]) -> float | None:
    """First time at which the Kaplan-Meier curve falls to 0.5 or below (None: censored, not reached)."""
    return next((t for t, s in kaplan_meier(times, events) if s <= 0.5), None)


def restricted_mean(times: Sequence[float], events: Sequence[bool], horizon: float) -> float:
    """Restricted mean formation time: the area under the Kaplan-Meier curve from 0 to `horizon`."""
    area, last_t, last_s = 0.0, 0.0, 1.0
    for t, s in kaplan_meier(times, events):
        if t >= horizon:
            break
        area += last_s * (t - last_t)
        last_t, last_s = t, s
    return area + last_s * (horizon - last_t)


def logrank_test(times_a: Sequence[float], events_a: Sequence[bool], times_b: Sequence[float],
                 events_b: Sequence[bool]) -> dict:
    """Two-sample log-rank test: {"chi2", "p" (chi-square, 1 df), "observed_a", "expected_a"}.

    observed_a < expected_a means group a forms *later* than the pooled hazard predicts."""
    times = [*times_a, *times_b]
    events = [*events_a, *events_b]
    group_a = [True] * len(times_a) + [False] * len(times_b)
    obs = exp = var = 0.0
    for t in sorted({t for t, e in zip(times, events) if e}):
        n = sum(1 for u in times if u >= t)
        n_a = sum(1 for u, g in zip(times, group_a) if g and u >= t)
        d = sum(1 for u, e in zip(times, events) if e and u == t)
        d_a = sum(1 for u, e, g in zip(times, events, group_a) if e and g and u == t)
        obs += d_a
        exp += d * n_a / n
        if n > 1:
            var += d * (n_a / n) * (1 - n_a / n) * (n - d) / (n - 1)
    chi2 = (obs - exp) ** 2 / var if var > 0 else 0.0
    return {"chi2": chi2, "p": math.erfc(math.sqrt(chi2 / 2)), "observed_a": obs, "expected_a": exp}


# ------------------------------------------------------------------------------------------ probes
def induction_targets(ids: Tensor, legacy_current_match: bool = False) -> Tensor:
    """[batch, pos] target token for the prediction made at position t-1 (index t); -1 where none.

    Correct alignment: key = tokens[t-1]; target = the token after the last earlier occurrence of the key
    (on `[a, b, c, a, b, c]` the target at t=4 is b = tokens[4]). Legacy: key = tokens[t] (the released
    code), which gives tokens[t+1] on a clean repeat.
    """
    out = torch.full_like(ids, -1)
    for b, row in enumerate(ids.tolist()):
        last: dict[int, int] = {}
        for t in range(1, len(row)):
            key_pos = t if legacy_current_match else t - 1
            key = row[key_pos]
            j = last.get(key) if not legacy_current_match else _last_before(row, key, t)
            if j is not None and j + 1 < len(row):
                out[b, t] = row[j + 1]
            if not legacy_current_match:
                last[row[t - 1]] = t - 1
    return out


def _last_before(row: list[int], key: int, t: int) -> int | None:
    for j in range(t - 1, -1, -1):
        if row[j] == key:
            return j
    return None


def copy_target_probe(legacy_current_match: bool = False) -> Objective:
    """Per-example `sum_t log p_theta(target_t | prefix up to t-1)` over positions that have a target."""

    def probe(model, ids: Tensor, mask: Tensor) -> Tensor:
        targets = induction_targets(ids.cpu(), legacy_current_match).to(ids.device)
        logp = model.hf_model(input_ids=ids, attention_mask=mask).logits.float().log_softmax(-1)[:, :-1]
        tgt = targets[:, 1:]
        picked = logp.gather(-1, tgt.clamp(min=0)[..., None])[..., 0]
        return (picked * (tgt >= 0)).sum(1)

    return probe


def prev_attn_probe(layer: int, head: int) -> Objective:
    """Per-example `sum_t A_head[t, t-1]` of the given layer."""

    def probe(model, ids: Tensor, mask: Tensor) -> Tensor:
        seen = {}

        def keep(p, hook):
            seen["p"] = p

        model.run_with_hooks(ids, fwd_hooks=[(f"blocks.{layer}.attn.hook_pattern", keep)])
        return seen["p"][:, head].diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1)

    return probe


# ------------------------------------------------------------------------------------------ ranking
def rank_training_samples(model, comp: HeadComponent, train_ids: Tensor, fit_ids: Tensor | None = None,
                          probe: str = "copy", n_probe: int = 32, half: int = 32, seed: int = 0,
                          batch_size: int = 8, legacy_current_match: bool = False,
                          tokens: tuple[int, int] | None = None) -> dict:
    """MDA influence of every training sequence on the head's probe, highest (most promoting) first.

    Returns {"scores": [n], "losses": [n], "order": indices by descending score, "component": str}.
    """
    comp.check(model)
    fit_ids = train_ids if fit_ids is None else fit_ids
    low, high = tokens or (1, model.d_vocab)
    if probe == "copy":
        ids = repeated_random(n_probe, half, high, seed, bos=None, low=low)
        objective = copy_target_probe(legacy_current_match)
    elif probe == "prev":
        ids, objective = random_tokens(n_probe, 2 * half, high, seed, low), prev_attn_probe(comp.layer, comp.head)
    else:
        raise ValueError(f"unknown probe {probe!r}; use 'copy' (induction) or 'prev' (previous-token)")
    grad_f = mean_gradient(model, comp, ids.to(model.device), objective)
    factors = fit_ekfac(model, comp, fit_ids.to(model.device), batch_size=batch_size, seed=seed)
    scores, losses = influence_scores(model, factors, train_ids.to(model.device), grad_f, batch_size=batch_size)
    return {"scores": scores.cpu(), "losses": losses.cpu(), "order": torch.argsort(scores.cpu(), descending=True),
            "component": str(comp)}
