"""The model's behaviour on a task before any circuit is looked for, and the refusal of a task it cannot do.

A circuit of a behaviour the model does not have is noise: every finder's output would look like an
answer. `baseline()` measures the metric on the clean and corrupted prompts and the accuracy (the best
right answer's logit above every wrong one's); `require_ability()` raises `TaskTooHard` with those
numbers when the accuracy is below the bar or the clean metric does not beat the corrupted one.

    report = baseline(model, task.make_pairs(64, 0, model.tokenizer), metric="logit-diff")
    require_ability(report, task.name, min_accuracy=0.7)
"""

from __future__ import annotations

import torch

from circuits.tasks.metrics import Metric, accuracy_rows, last, metric_rows
from circuits.tasks.pairs import PairBatch


class TaskTooHard(ValueError):
    """The model does not do the task well enough for a circuit of it to mean anything."""


@torch.no_grad()
def baseline(model, batch: PairBatch, metric: Metric = "logit-diff", batch_size: int = 16) -> dict:
    """Clean and corrupted metric (mean and per-row spread), clean accuracy, on `batch`."""
    clean, corrupt, acc, acc_c, prob = [], [], [], [], []
    for sub in batch.split(batch_size):
        sub = sub.to(model.device)
        logits = model({"input_ids": sub.clean, "attention_mask": sub.clean_mask})
        ref = last(logits, sub.clean_pos) if metric == "kl" else None
        clean.append(metric_rows(logits, sub, metric, ref).cpu())
        acc.append(accuracy_rows(logits, sub).cpu())
        prob.append(metric_rows(logits, sub, "prob").cpu())  # the answer set's probability (viewers print it)
        if sub.corrupt is not None:
            lc = model({"input_ids": sub.corrupt, "attention_mask": sub.corrupt_mask})
            corrupt.append(metric_rows(lc, sub, metric, ref, pos=sub.corrupt_pos).cpu())
            acc_c.append(accuracy_rows(lc, sub, pos=sub.corrupt_pos).cpu())
    c = torch.cat(clean)
    out = {
        "metric": metric,
        "n": len(batch),
        "clean_metric": float(c.mean()),
        "clean_metric_std": float(c.std()) if len(c) > 1 else 0.0,
        "clean_accuracy": float(torch.cat(acc).mean()),
        "clean_answer_prob": float(torch.cat(prob).mean()),
    }
    if corrupt:
        k = torch.cat(corrupt)
        out.update({"corrupt_metric": float(k.mean()), "corrupt_accuracy": float(torch.cat(acc_c).mean())})
    return out


def require_ability(report: dict, task: str, min_accuracy: float = 0.7) -> None:
    """Raise `TaskTooHard` (with the numbers) when the model cannot do the task; `min_accuracy=0` only reports."""
    if min_accuracy <= 0:
        return
    acc = report["clean_accuracy"]
    problems = []
    if acc < min_accuracy:
        problems.append(f"accuracy {acc:.2f} < {min_accuracy:.2f}")
    if report["metric"] == "logit-diff" and report["clean_metric"] <= 0:
        problems.append(f"mean logit difference {report['clean_metric']:.3f} <= 0")
    if "corrupt_metric" in report and report["metric"] != "kl" and report["clean_metric"] <= report["corrupt_metric"]:
        problems.append(
            f"clean {report['metric']} {report['clean_metric']:.3f} does not beat corrupted "
            f"{report['corrupt_metric']:.3f}"
        )
    if problems:
        raise TaskTooHard(
            f"the model cannot do task {task!r} ({'; '.join(problems)} on {report['n']} prompts), so a "
            "circuit of it would be noise. Pick a task it does, or pass --min-accuracy 0 to look anyway"
        )
