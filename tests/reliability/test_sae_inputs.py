"""SAE folders and the models they run on, at the door (issue 40 cases 5, 6, 7): a weights file that is a
pickle, a header claiming tensors the file does not hold, a symlink to a system file, weights of another width
than the config, NaN weights, or a `--model` of another width than the SAE's are one `error:` line (exit 2)
naming the file or the SAE's own model, in `circuits features`, `sae eval` and `sae dashboard`; nothing is
unpickled and nothing is written. The checks are the core's (`interp.infra.sae_folder`), shared by
`sae.load_sae` and circuits' `load_dictionary`."""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest
import torch

from tests.reliability.refusals import assert_refused, invoke, snapshot, token_store

MODEL, WIDER = "pythia-14m-init", "pythia-31m-init"  # d_model 128 and 256
HOOK = "blocks.0.hook_resid_post"


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _sae(folder, d_in=128, nan=False):
    from sae import make_sae

    s = make_sae("topk", d_in=d_in, d_sae=16, k=2, seed=0)
    s.cfg.metadata.hook_name, s.cfg.metadata.model_name = HOOK, MODEL
    if nan:
        with torch.no_grad():
            s.W_enc[0, 0] = float("nan")
    s.save_model(str(folder))
    return folder


def _damage(kind, good, folder):
    shutil.copytree(good, folder)
    weights = folder / "sae_weights.safetensors"
    if kind == "pickle":
        import pickle

        weights.write_bytes(pickle.dumps({"W_enc": _Payload(folder.parent / "PWNED")}))
    elif kind == "huge_header":  # 2^20 x 2^20 floats claimed, 64 bytes held
        head = json.dumps({"W_enc": {"dtype": "F32", "shape": [2**20, 2**20], "data_offsets": [0, 2**42]}}).encode()
        weights.write_bytes(struct.pack("<Q", len(head)) + head + bytes(64))
    elif kind == "system_file":
        weights.unlink()
        os.symlink("/etc/passwd", weights)
    elif kind == "other_width":  # the weights of an SAE of another hook's width under this config
        weights.unlink()
        shutil.copy(_sae(folder.parent / "wide_sae", d_in=512) / "sae_weights.safetensors", weights)
    return folder


NEEDLES = {
    "pickle": ("sae_weights.safetensors", "cannot read"),
    "huge_header": ("sae_weights.safetensors", "cannot read"),
    "system_file": ("sae_weights.safetensors", "a symlink to /etc/passwd"),
    "other_width": ("W_enc has shape [512, 16]", "cfg.json says [128, 16]"),
}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return _sae(tmp_path_factory.mktemp("sae") / "good")


def _features(sae, out, model=MODEL):
    return invoke(
        ["circuits", "features", "--model", model, "--task", "quotes", "--sae", sae, "--out", out, "--device", "cpu"]
        + ["--max-rows", "4", "--n-eval", "4", "--seeds", "1", "--sizes", "1,3"]
    )


@pytest.mark.parametrize("kind", ["pickle", "huge_header", "system_file", "other_width"])
def test_circuits_features_refuses_damaged_weights(good, tmp_path, kind):
    folder = _damage(kind, good, tmp_path / "bad")
    before = snapshot(tmp_path)
    assert_refused(_features(folder, tmp_path / "out"), str(folder), *NEEDLES[kind])
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("kind", ["pickle", "huge_header", "system_file"])
def test_sae_load_refuses_damaged_weights_in_one_line(good, tmp_path, kind):
    import sae as S

    folder = _damage(kind, good, tmp_path / "bad")
    with pytest.raises(ValueError) as err:
        S.load_sae(folder)
    assert str(folder) in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "PWNED").exists()


def test_nan_weights_are_refused_at_load_by_both_loaders(tmp_path):
    """`sae.load_sae` (sae eval, dashboard, the saebench suite, steering) and circuits' `load_dictionary`."""
    import sae as S
    from circuits.model.dictionary import load_dictionary

    folder = _sae(tmp_path / "nan", nan=True)
    for load in (S.load_sae, S.from_pretrained, load_dictionary):
        with pytest.raises(ValueError, match=r"W_enc holds 1 NaN or inf values of 2048") as err:
            load(folder)
        assert str(folder) in str(err.value)


def test_circuits_features_refuses_nan_weights(tmp_path):
    folder = _sae(tmp_path / "nan", nan=True)
    before = snapshot(tmp_path)
    assert_refused(_features(folder, tmp_path / "out"), str(folder), "NaN", "retrain")
    assert snapshot(tmp_path) == before


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    token_store(root / "store", d=128, model=MODEL)
    return root / "store"


def test_sae_eval_refuses_nan_weights(store, tmp_path):
    folder = _sae(tmp_path / "nan", nan=True)
    before = snapshot(tmp_path)
    r = invoke(["sae", "eval", "--sae", folder, "--store", store, "--exclude", "none", "--out", tmp_path / "m"])
    assert_refused(r, str(folder), "NaN")
    assert snapshot(tmp_path) == before


def test_circuits_features_on_a_model_of_another_width_names_the_saes_model(good, tmp_path):
    before = snapshot(tmp_path)
    r = _features(good, tmp_path / "out", model=WIDER)
    assert_refused(r, "d_in 128", "width 256", f"run it on '{MODEL}'")
    assert snapshot(tmp_path) == before


def test_circuits_features_on_an_sae_of_another_hook_width_names_the_saes_model(tmp_path):
    folder = _sae(tmp_path / "wide", d_in=512)  # consistent in itself, 512 wide; the model's residual is 128
    before = snapshot(tmp_path)
    assert_refused(_features(folder, tmp_path / "out"), str(folder), "d_in 512", "width 128")
    assert snapshot(tmp_path) == before


def test_sae_eval_with_a_model_of_another_width_names_the_saes_model(good, store, tmp_path):
    args = ["sae", "eval", "--sae", good, "--store", store, "--exclude", "none", "--n-ce-seqs", "2"]
    before = snapshot(tmp_path)
    r = invoke([*args, "--model", WIDER, "--out", tmp_path / "m"])
    assert_refused(r, f"trained on '{MODEL}'", f"pass --model {MODEL}", "--allow-other-hook")
    # a deliberate transfer study still may not run an SAE on a width it cannot read
    r = invoke([*args, "--model", WIDER, "--allow-other-hook", "--out", tmp_path / "m"])
    assert_refused(r, "d_in 128", "width 256", f"run it on '{MODEL}'")
    assert snapshot(tmp_path) == before


def test_sae_dashboard_with_a_model_of_another_width_names_the_saes_model(good, store, tmp_path):
    before = snapshot(tmp_path)
    r = invoke(
        ["sae", "dashboard", "--sae", good, "--store", store, "--model", WIDER, "--out", tmp_path / "dash"]
        + ["--top", "2", "--exclude", "none"]
    )
    assert_refused(r, f"trained on '{MODEL}'", f"pass --model {MODEL}")
    assert snapshot(tmp_path) == before
