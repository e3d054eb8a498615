"""Tiny models for the probe tests: a 4-layer Llama, and the hook that plants a massive activation."""

import pytest
import torch

import interp
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf

PLANT_LAYER, PLANT_CHANNEL, PLANT_POS, SPIKE = 1, 17, 3, 5000.0


def plant(h, hook):
    """Add a spike to one channel at one position of the residual stream from `PLANT_LAYER` on."""
    h = h.clone()
    h[:, PLANT_POS, PLANT_CHANNEL] += SPIKE
    return h


PLANT_HOOKS = [(f"blocks.{PLANT_LAYER}.hook_resid_post", plant)]


@pytest.fixture(scope="module")
def tiny():
    return interp.HookedModel(tiny_hf("llama", seed=0, num_hidden_layers=4), byte_tokenizer())


@pytest.fixture(scope="module")
def tokens():
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (12, 24), generator=gen)


def no_hooks_left(model) -> bool:
    """True when no forward/backward hook and no attention-hook table entry remains on any module."""
    from interp.hooks.attention import ATTR

    for m in model.hf_model.modules():
        if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or getattr(m, ATTR, None):
            return False
    return True
