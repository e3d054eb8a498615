import pytest

import interp
from interp.data import byte_tokenizer
from tests.tiny import tiny_hf


@pytest.fixture(scope="module")
def neox():
    return interp.HookedModel(tiny_hf("gpt_neox_seq"), byte_tokenizer())


def make_model(arch: str, seed: int = 0):
    return interp.HookedModel(tiny_hf(arch, seed=seed), byte_tokenizer())


@pytest.fixture(autouse=True, scope="package")
def one_thread():
    """Tiny models run many times faster on one thread when the machine's cores are shared."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
