import json

from circuits.demo import step
from circuits.format.circuit import Circuit


def test_demo_step_finds_a_refusal_circuit(tmp_path):
    report = step(None, tmp_path)
    json.dumps(report)
    c = Circuit.load(report["circuit"])
    assert c.provenance["task"] == "refusal" and len(c.nodes) > 0
    assert report["refusal_rate"] >= 0.9
    # removing the circuit breaks refusal far more than removing random units of the same size
    assert report["refusal_with_circuit_removed"] < report["refusal_with_random_removal"] - 0.5
