"""Attribution tests run tiny models: one intra-op thread avoids thread start-up and contention costs
that dominate such small ops on a shared 2-core machine (measured 6x on this machine's FFTs)."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
