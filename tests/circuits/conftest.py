import pytest

import interp
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf


@pytest.fixture(scope="module")
def neox():
    return interp.HookedModel(tiny_hf("gpt_neox_seq"), byte_tokenizer())


def make_model(arch: str, seed: int = 0):
    return interp.HookedModel(tiny_hf(arch, seed=seed), byte_tokenizer())
