"""circuits: SafeSeek masks and weight-sparse training + pruning, one circuit file format (see circuits/README.md).

    from circuits import Circuit, get_task, safeseek, SafeSeekConfig, prune, PruneConfig, load_checkpoint
    model = load_checkpoint("runs/circuits/backdoor/models/backdoored")
    circuit = safeseek(model, get_task("backdoor"), SafeSeekConfig()).circuit
    circuit.save("circuit.json")
"""

from circuits.ablation import ablation_report
from circuits.checkpoint import CheckpointError, load_checkpoint
from circuits.format import Circuit, CircuitFormatError, Edge, Node
from circuits.masks import UnitMasks
from circuits.prune import PruneConfig, TargetNotReached, prune
from circuits.safeseek import SafeSeekConfig, circuit_tuning, safeseek
from circuits.tasks import TASKS, Task, get_task
from circuits.weight_sparse import WeightSparseConfig, build_model, train_weight_sparse

__all__ = [
    "TASKS", "CheckpointError", "Circuit", "CircuitFormatError", "Edge", "Node", "PruneConfig", "SafeSeekConfig",
    "TargetNotReached", "Task", "UnitMasks", "WeightSparseConfig", "ablation_report", "build_model", "circuit_tuning",
    "get_task", "load_checkpoint", "prune", "safeseek", "train_weight_sparse",
]
