"""report: seed summaries and stacking several runs' results into lists."""

import pytest

from interp.contrib.report import fmt, stack_runs


def test_stack_runs_lists_numbers_and_keeps_agreed_values():
    runs = [
        {"a": 1.0, "n": {"x": 2, "label": "k"}, "name": "m", "flag": True},
        {"a": 3.0, "n": {"x": 4, "label": "k"}, "name": "m", "flag": False},
    ]
    out = stack_runs(runs)
    assert out == {"a": [1.0, 3.0], "n": {"x": [2, 4], "label": "k"}, "name": "m", "flag": [True, False]}
    assert fmt(out["a"]) == "2.000 ± 1.414"
    assert stack_runs([{"a": 0.5}]) == {"a": [0.5]}  # one run: lists of one, printed without a spread
    assert fmt(stack_runs([{"a": 0.5}])["a"]) == "0.500"


def test_stack_runs_refuses_runs_of_other_keys():
    with pytest.raises(ValueError, match="different keys"):
        stack_runs([{"a": 1.0}, {"b": 1.0}])
    with pytest.raises(ValueError, match="at least one run"):
        stack_runs([])
