"""Leftovers of the red-team pass (issue 17, cause 12 and 'also worth fixing'): values that used to be
accepted silently are refused before any work, with the option named."""

from types import SimpleNamespace

import pytest

from circuits.format.circuit import Circuit, Node, check_circuit_model
from interp.cli.dashboard import _tokenizer
from sae.evaluate import evaluate_store


def test_sae_eval_refuses_a_non_positive_row_count_and_unknown_codes():
    # the checks come before the SAE or the store is touched
    with pytest.raises(ValueError, match="--max-rows must be >= 1, got -1"):
        evaluate_store(None, None, None, max_rows=-1)
    with pytest.raises(ValueError, match="--codes must be threshold or batch"):
        evaluate_store(None, None, None, codes="topk")


def test_a_dashboard_model_the_user_named_must_load_but_the_store_model_may_be_absent():
    with pytest.raises(ValueError, match="--model 'nope' gives no tokenizer"):
        _tokenizer("nope", explicit=True)
    assert _tokenizer("nope", explicit=False) is None  # a store recorded on another machine: token ids


def _model(model_type="gpt_neox", n_layers=2, n_heads=4, sha="a" * 64):
    prov = {"spec": "here", "model_type": model_type, "weights_sha256": sha}
    return SimpleNamespace(provenance=prov, name="here", n_layers=n_layers, n_heads=n_heads)


def _circuit(layer=1, head=3, model_type="gpt_neox", sha="a" * 64):
    prov = {"model": {"spec": "there", "model_type": model_type, "weights_sha256": sha}, "task": "quotes"}
    return Circuit(nodes=[Node(layer, "head", head)], provenance=prov)


def test_a_circuit_from_another_model_is_refused_or_flagged():
    assert check_circuit_model(_circuit(), _model()) is None
    with pytest.raises(ValueError, match="found on a llama model"):
        check_circuit_model(_circuit(model_type="llama"), _model())
    with pytest.raises(ValueError, match="layer 5 but here has 2 layers"):
        check_circuit_model(_circuit(layer=5), _model())
    with pytest.raises(ValueError, match="head 7 but here has 4 heads"):
        check_circuit_model(_circuit(head=7), _model())
    note = check_circuit_model(_circuit(sha="b" * 64), _model())
    assert note and note.startswith("warning: the circuit was found on other weights")
