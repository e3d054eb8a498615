import torch

from attribution.sketch import (
    CountHash,
    count_sketch,
    explicit_outer_sketch,
    tensor_sketch_embedding,
    tensor_sketch_linear,
)


def test_tensor_sketch_equals_explicit_count_sketch_of_outer_product():
    g = torch.Generator().manual_seed(0)
    acts, grads = torch.randn(3, 5, 7, generator=g), torch.randn(3, 5, 4, generator=g)
    h_in, h_out = CountHash.make(7, 64, 1), CountHash.make(4, 64, 2)
    fast = tensor_sketch_linear(acts, grads, h_in, h_out)
    explicit = explicit_outer_sketch(torch.einsum("blo,bli->boi", grads, acts), h_in, h_out)
    torch.testing.assert_close(fast, explicit, rtol=1e-4, atol=1e-5)


def test_embedding_sketch_equals_explicit_count_sketch_of_one_hot_outer_product():
    g = torch.Generator().manual_seed(1)
    ids, grads = torch.randint(0, 11, (2, 6), generator=g), torch.randn(2, 6, 5, generator=g)
    h_tok, h_out = CountHash.make(11, 32, 3), CountHash.make(5, 32, 4)
    fast = tensor_sketch_embedding(ids, grads, h_tok, h_out)
    dense = torch.einsum("blv,blo->bvo", torch.nn.functional.one_hot(ids, 11).float(), grads)
    torch.testing.assert_close(fast, explicit_outer_sketch(dense, h_out, h_tok), rtol=1e-4, atol=1e-5)


def test_count_sketch_of_sum_is_sum_of_sketches():
    h = CountHash.make(9, 16, 5)
    a, b = torch.randn(4, 9), torch.randn(4, 9)
    torch.testing.assert_close(count_sketch(a + b, h), count_sketch(a, h) + count_sketch(b, h))


def _estimates(m: int, seeds: int, g1, g2):
    (a1, d1), (a2, d2) = g1, g2
    out = []
    for s in range(seeds):
        h_in, h_out = CountHash.make(a1.shape[-1], m, 1000 + s), CountHash.make(d1.shape[-1], m, 5000 + s)
        out.append((tensor_sketch_linear(a1, d1, h_in, h_out) * tensor_sketch_linear(a2, d2, h_in, h_out)).sum())
    return torch.stack(out)


def test_sketched_inner_products_are_unbiased_and_variance_falls_with_m():
    g = torch.Generator().manual_seed(2)
    a1, d1 = torch.randn(1, 6, 24, generator=g), torch.randn(1, 6, 16, generator=g)
    a2, d2 = a1 + 0.5 * torch.randn(1, 6, 24, generator=g), d1 + 0.5 * torch.randn(1, 6, 16, generator=g)
    G1, G2 = torch.einsum("blo,bli->oi", d1, a1), torch.einsum("blo,bli->oi", d2, a2)
    true = (G1 * G2).sum()
    small, large = _estimates(32, 400, (a1, d1), (a2, d2)), _estimates(512, 400, (a1, d1), (a2, d2))
    for est in (small, large):  # the mean over seeds is within 4 standard errors of the truth
        assert abs(est.mean() - true) < 4 * est.std() / len(est) ** 0.5 + 1e-6
    assert small.var() > 6 * large.var()  # 16x the sketch size: variance ~1/m
