"""circuits: EAP / EAP-IG edge attribution, SafeSeek masks, weight-sparse training + pruning, one circuit file format.

    from circuits import eap_ig, get_task, load_checkpoint
    model = load_checkpoint("smollm2-135m")
    scores = eap_ig(model, get_task("ioi").make_pairs(32, 0, model.tokenizer), steps=5)
    scores.to_circuit(top_n=300).save("circuit.json")

See circuits/README.md.
"""

from circuits.evaluation.ablation import ablation_report
from circuits.evaluation.baseline import TaskTooHard, baseline
from circuits.finders.eap import EdgeScores, eap, eap_ig
from circuits.finders.extract import ExtractConfig, extract
from circuits.finders.feature_circuit import FeatureScores, feature_scores
from circuits.finders.masks import UnitMasks
from circuits.finders.prune import PruneConfig, TargetNotReached, prune
from circuits.finders.safeseek import SafeSeekConfig, circuit_tuning, safeseek
from circuits.finders.weight_sparse import WeightSparseConfig, build_model, train_weight_sparse
from circuits.format.circuit import Circuit, CircuitFormatError, Edge, Node
from circuits.model.checkpoint import CheckpointError, load_checkpoint
from circuits.tasks.binary import TASKS, Task, get_task
from circuits.tasks.pairs import PairBatch, encode_pairs

__all__ = [
    "TASKS",
    "CheckpointError",
    "Circuit",
    "CircuitFormatError",
    "Edge",
    "EdgeScores",
    "ExtractConfig",
    "FeatureScores",
    "Node",
    "PairBatch",
    "PruneConfig",
    "SafeSeekConfig",
    "TaskTooHard",
    "baseline",
    "eap",
    "eap_ig",
    "encode_pairs",
    "extract",
    "feature_scores",
    "TargetNotReached",
    "Task",
    "UnitMasks",
    "WeightSparseConfig",
    "ablation_report",
    "build_model",
    "circuit_tuning",
    "get_task",
    "load_checkpoint",
    "prune",
    "safeseek",
    "train_weight_sparse",
]
