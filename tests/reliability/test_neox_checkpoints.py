"""A GPT-NeoX model saved by transformers' `save_pretrained` loads as a lone .safetensors in circuits
(issue 17 cause 16: `embed_out.weight` in the file, `lm_head.weight` in the module)."""

from __future__ import annotations

import shutil

import pytest
import torch

from circuits.model.checkpoint import CheckpointError, load_checkpoint
from tests.tiny import tiny_hf


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("neox")
    model = tiny_hf("gpt_neox_seq", seed=3)
    model.save_pretrained(root / "hf")
    return model, root


def _logits(hf, ids):
    with torch.no_grad():
        return hf(ids).logits


def test_a_save_pretrained_file_loads_alone_with_the_same_logits(saved, tmp_path):
    model, root = saved
    shutil.copy(root / "hf" / "config.json", tmp_path / "config.json")
    shutil.copy(root / "hf" / "model.safetensors", tmp_path / "step_100.safetensors")
    loaded = load_checkpoint(tmp_path / "step_100.safetensors")
    ids = torch.randint(0, 257, (2, 12), generator=torch.Generator().manual_seed(0))
    assert torch.equal(_logits(loaded.hf_model, ids), _logits(model, ids))


def test_a_state_dict_pickle_loads_through_the_same_path(saved, tmp_path):
    model, root = saved
    shutil.copy(root / "hf" / "config.json", tmp_path / "config.json")
    torch.save(model.state_dict(), tmp_path / "model.pt")
    loaded = load_checkpoint(tmp_path / "model.pt", allow_torch_load=True)
    ids = torch.randint(0, 257, (1, 8), generator=torch.Generator().manual_seed(1))
    assert torch.equal(_logits(loaded.hf_model, ids), _logits(model, ids))


def test_weights_of_another_model_are_refused_by_name(saved, tmp_path):
    _, root = saved
    tiny_hf("llama").save_pretrained(tmp_path / "llama")
    shutil.copy(root / "hf" / "config.json", tmp_path / "config.json")
    shutil.copy(tmp_path / "llama" / "model.safetensors", tmp_path / "w.safetensors")
    with pytest.raises(CheckpointError, match="w.safetensors does not match"):
        load_checkpoint(tmp_path / "w.safetensors")
