"""No model folder or checkpoint runs code: pickle-only weights and remote-code folders are refused in one
line naming the file and the fix (issue 17 cause 17), safetensors folders still load."""

from __future__ import annotations

import json
import os

import pytest
import torch
from typer.testing import CliRunner

import interp
from interp.cli.main import app
from interp.models.safety import UnsafeModelFolderError
from tests.tiny import tiny_hf

runner = CliRunner()


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def folder(tmp_path):
    model = tiny_hf("gpt_neox")
    model.save_pretrained(tmp_path / "m")  # safetensors by default
    return tmp_path / "m"


def test_a_safetensors_folder_loads(folder):
    assert interp.load_model(str(folder)).hf_model.config.model_type == "gpt_neox"


def test_pickle_only_weights_are_refused_without_unpickling(folder, tmp_path):
    marker = tmp_path / "PWNED"
    (folder / "model.safetensors").unlink()
    torch.save({"gpt_neox.embed_in.weight": _Payload(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(UnsafeModelFolderError, match=r"pytorch_model.bin.*safetensors"):
        interp.load_model(str(folder))
    assert not marker.exists()


@pytest.mark.parametrize("config_file", ["config.json", "tokenizer_config.json"])
def test_remote_code_folders_are_refused_in_one_line(folder, tmp_path, config_file):
    marker = tmp_path / "PWNED"
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    path = folder / config_file
    cfg = json.loads(path.read_text()) if path.exists() else {}
    cfg["auto_map"] = {"AutoModelForCausalLM": "evil.Model", "AutoTokenizer": ["evil.Tok", None]}
    path.write_text(json.dumps(cfg))
    r = runner.invoke(
        app,
        [
            "cache",
            "--model",
            str(folder),
            "--out",
            str(tmp_path / "store"),
            "--max-tokens",
            "64",
            "--ctx-len",
            "16",
            "--data",
            "synthetic:repeat",
        ],
    )
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "auto_map" in lines[0], r.output
    assert not marker.exists() and not (tmp_path / "store").exists()
