"""Tiny models with non-trivial norm weights (random init leaves them at 1 and 0, which hides mistakes)."""

import torch

import interp
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf


def rough_norms(hf_model, seed: int = 1):
    """Give every norm a random weight (and bias) so that weight-before/after mix-ups show."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in hf_model.modules():
            if "Norm" in type(mod).__name__ and getattr(mod, "weight", None) is not None:
                mod.weight.copy_(1 + 0.3 * torch.randn(mod.weight.shape, generator=gen))
                if getattr(mod, "bias", None) is not None:
                    mod.bias.copy_(0.3 * torch.randn(mod.bias.shape, generator=gen))
    return hf_model


def wrap(arch, seed=0, **kw):
    return interp.HookedModel(rough_norms(tiny_hf(arch, seed=seed, **kw)), byte_tokenizer())


def ids(batch=2, pos=12, seed=0):
    return torch.randint(0, 256, (batch, pos), generator=torch.Generator().manual_seed(seed))


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp(min=1e-12)).item()
