"""`interp sae eval` on a store of another hook or another model (issue 29 cause 12): the SAE's cfg records
both, so a mismatch is refused in one line (it used to exit 0 with FVU > 1 and most latents dead), unless
`--allow-other-hook` asks for a deliberate transfer study."""

from __future__ import annotations

import json

import pytest

from tests.reliability.refusals import assert_refused, invoke, snapshot, token_store

H0, H1 = "blocks.0.hook_resid_post", "blocks.1.hook_resid_post"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("mismatch")
    token_store(root / "store", model="pythia-14m-init", also=(H1,))
    token_store(root / "other_model", model="smollm2-135m")
    r = invoke(
        [
            "sae",
            "train",
            "--store",
            root / "store",
            "--hook",
            H0,
            "--arch",
            "topk",
            "--d-sae",
            "16",
            "--k",
            "2",
            "--out",
            root / "sae",
            "--max-tokens",
            "256",
            "--batch-size",
            "64",
            "--exclude",
            "none",
        ]
    )
    assert r.exit_code == 0, r.output
    return root


def _eval(root, store, *extra):
    return invoke(["sae", "eval", "--sae", root / "sae", "--store", root / store, "--exclude", "none", *extra])


def test_the_recorded_hook_is_scored(trained):
    r = _eval(trained, "store")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["hook"] == H0


@pytest.mark.parametrize(
    "store, extra, needle",
    [
        ("store", ["--hook", H1], f"trained on '{H0}', not '{H1}'"),
        ("other_model", [], "trained on activations of 'pythia-14m-init'"),
    ],
)
def test_another_hook_or_model_is_refused(trained, store, extra, needle):
    before = snapshot(trained)
    assert_refused(_eval(trained, store, *extra), needle, "--allow-other-hook")
    assert snapshot(trained) == before


def test_allow_other_hook_scores_it_anyway(trained):
    r = _eval(trained, "store", "--hooks", H1, "--allow-other-hook")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["hook"] == H1
