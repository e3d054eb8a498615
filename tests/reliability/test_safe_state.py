"""`interp.infra.safe_state`: nested training state round-trips through safetensors + JSON without pickle."""

import math

import pytest
import torch

from interp.infra.safe_state import StateFileError, load_state, load_torch_weights_only, save_state


def test_round_trip_keeps_types_keys_and_tensors(tmp_path):
    opt = torch.optim.Adam([torch.nn.Parameter(torch.randn(3, 2))], lr=1e-3)
    opt.zero_grad()
    opt.param_groups[0]["params"][0].sum().backward()
    opt.step()
    state = {
        "optimizer": opt.state_dict(),
        "n": 7,
        "flag": False,
        "none": None,
        "inf": float("inf"),
        "pair": (1, 2.5),
        "list": [torch.arange(3), "x"],
    }
    save_state(tmp_path, "s", state)
    back = load_state(tmp_path, "s")
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert list(back["optimizer"]["state"]) == [0]  # int keys stay ints
    assert torch.equal(back["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"])
    assert back["pair"] == (1, 2.5) and math.isinf(back["inf"]) and back["none"] is None and back["flag"] is False
    assert torch.equal(back["list"][0], torch.arange(3)) and back["list"][1] == "x"
    opt.load_state_dict(back["optimizer"])


def test_objects_that_need_pickle_are_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match="cannot be saved without pickle"):
        save_state(tmp_path, "s", {"f": lambda: 0})
    assert not list(tmp_path.iterdir())


def test_damaged_or_foreign_files_are_named(tmp_path):
    save_state(tmp_path, "s", {"t": torch.ones(2)})
    (tmp_path / "s.safetensors").write_bytes(b"\x00" * 20)
    with pytest.raises(StateFileError, match="s.json"):
        load_state(tmp_path, "s")
    (tmp_path / "x.pt").write_bytes(b"not a zip")
    with pytest.raises(StateFileError, match="x.pt"):
        load_torch_weights_only(tmp_path / "x.pt")
