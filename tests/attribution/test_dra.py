import pytest
import torch

from attribution.dra import RAW, DenoiseConfig, average_precision, dra_scores, neutral_filtered_targets


def brute_force_ap(scores, labels):
    """Mean over positives of the precision at that positive's score threshold (ties count together)."""
    pos = [i for i in range(len(labels)) if labels[i] == 1]
    precisions = []
    for i in pos:
        above = [j for j in range(len(scores)) if scores[j] >= scores[i]]
        precisions.append(sum(labels[j] for j in above) / len(above))
    return sum(precisions) / len(pos)


def test_average_precision_matches_hand_computed_and_independent_definition():
    assert average_precision(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1])) == pytest.approx(5 / 6)
    g = torch.Generator().manual_seed(0)
    for trial in range(20):
        n = 30
        scores = torch.randint(0, 8, (n,), generator=g).float() if trial % 2 else torch.rand(n, generator=g)
        labels = (torch.rand(n, generator=g) < 0.3).long()
        labels[0] = 1
        assert average_precision(scores, labels) == pytest.approx(
            brute_force_ap(scores.tolist(), labels.tolist()), abs=1e-9
        )


def test_average_precision_rejects_no_positives():
    with pytest.raises(ValueError, match="positive"):
        average_precision(torch.rand(4), torch.zeros(4))


def _planted(seed=0, n=400, d=64, n_unsafe=16):
    """Research-spec design: benign pool = template A (60%) + diverse texts sharing template B (36%);
    unsafe = template A + a weak 'critical' direction (4%); targets = template B + critical."""
    g = torch.Generator().manual_seed(seed)
    a, b, critical = torch.randn(3, d, generator=g)
    pool = torch.randn(n, d, generator=g)
    n_a = int(0.6 * n)
    pool[:n_a] += 3 * a
    pool[n_a:] += 3 * b
    labels = torch.zeros(n, dtype=torch.long)
    labels[:n_unsafe] = 1
    pool[:n_unsafe] += 1.5 * critical
    targets = 3 * b + 1.5 * critical + torch.randn(5, d, generator=g)
    return pool, targets, labels


def test_denoising_beats_raw_similarity_on_planted_samples():
    pool, targets, labels = _planted()
    raw = average_precision(dra_scores(pool, targets, RAW).scores, labels)
    den = dra_scores(pool, targets, DenoiseConfig())  # center + whiten + leave-one-target-out dims
    assert average_precision(den.scores, labels) > raw + 0.2
    assert den.k_curve and den.dims is not None


def test_neutral_token_removal_drops_pool_typical_tokens():
    g = torch.Generator().manual_seed(1)
    pool_tokens = torch.randn(500, 8, generator=g)
    critical = torch.full((3, 8), 6.0)
    target = torch.cat([pool_tokens[:7], critical])  # 7 neutral tokens, 3 critical
    pooled = neutral_filtered_targets([target], pool_tokens, frac=0.7)
    torch.testing.assert_close(pooled[0], critical.mean(0))


def test_bad_config_is_refused():
    with pytest.raises(ValueError, match="neutral_frac"):
        DenoiseConfig(neutral_frac=1.5)
    with pytest.raises(ValueError, match="width"):
        dra_scores(torch.randn(5, 4), torch.randn(2, 3))


def test_whitening_without_a_d_by_d_matrix_equals_the_explicit_inverse_square_root():
    from attribution.dra import _whiten

    g = torch.Generator().manual_seed(2)
    x = torch.randn(12, 20, generator=g, dtype=torch.float64)  # fewer samples than dimensions
    x = x - x.mean(0)
    cov = x.T @ x / 11
    lam = 0.1 * cov.trace() / 20
    e, v = torch.linalg.eigh(cov + lam * torch.eye(20, dtype=torch.float64))
    w = v @ torch.diag(e.rsqrt()) @ v.T
    torch.testing.assert_close(_whiten(x, x[:3], 0.1)[1], x[:3] @ w)
