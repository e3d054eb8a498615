"""The three LDS tasks in one table (attribution/README.md): method -> LDS [95% CI] per task, and ours - Kronfluence.

    python -m attribution.experiments.lds_table --neox runs/lds_neox --llama runs/lds_llama --digits runs/lds_digits

Reads what the three runs left (it trains and scores nothing): `lds.json` of each folder for the table, and the
cached scores with the retrained losses for the paired differences of our EK-FAC against Kronfluence's (the same
resampled subsets and queries for both, `attribution.lds.lds_difference`). The folders come from

    interp attribute lds --out runs/lds_neox --task neox -m 50
    python -m attribution.experiments.tiny_llama --out runs/tiny-llama
    interp attribute lds --out runs/lds_llama --model runs/tiny-llama --data pydoc-topics --ctx-len 64 -m 50
    python -m attribution.experiments.digits_lds --out runs/lds_digits

(Kronfluence and dattri on the path for their rows; a row a run did not score is a dash.)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

TASKS = ("neox", "llama", "digits")
HEADS = {
    "neox": "NeoX 2L d64, stdlib-docs (tuned on)",
    "llama": "your model: Llama 3L d96 GQA, pydoc-topics",
    "digits": "digits MLP classifier",
}
ROWS: list[tuple[str, dict[str, str]]] = [
    ("EK-FAC, ours, every Linear (1 sampled label per row)", dict(neox="ekfac_linear", llama="ekfac_linear",
                                                                digits="ekfac_1")),
    ("EK-FAC, ours, every Linear, 4 sampled labels per row", dict(digits="ekfac")),
    ("EK-FAC, ours, attention Linears", dict(neox="ekfac_linear_attn", llama="ekfac_linear_attn")),
    ("EK-FAC, ours, MLP Linears", dict(neox="ekfac_linear_mlp", llama="ekfac_linear_mlp")),
    ("EK-FAC, ours, attention heads (q\\|k, v, o), damped per head", dict(neox="ekfac", llama="ekfac")),
    ("the same, damped per block", dict(neox="ekfac_block", llama="ekfac_block")),
    ("the same, damped per module", dict(neox="ekfac_module", llama="ekfac_module")),
    ("**Kronfluence 1.0.1** EK-FAC, every Linear (its defaults)", dict(neox="kronfluence", llama="kronfluence",
                                                                     digits="kronfluence")),
    ("TracIn (4 checkpoints)", dict(neox="tracin", llama="tracin", digits="tracin")),
    ("gradient dot product", dict(neox="grad_dot", llama="grad_dot", digits="grad_dot")),
    ("gradient cosine", dict(neox="grad_cos", llama="grad_cos")),
    ("TRAK-style, ours (projection 512, one model)", dict(neox="trak", llama="trak", digits="trak")),
    ("**dattri 0.3.0 TRAK** (its defaults: projection 512, one model)", dict(neox="dattri_trak", llama="dattri_trak",
                                                                           digits="dattri_trak")),
    ("DRA representation similarity", dict(neox="dra", llama="dra")),
]  # fmt: skip
"""Table rows: label -> the method's name in each task's run (absent: the method does not apply there)."""
PAIRS = {
    "neox": [("ekfac_linear", "kronfluence")],
    "llama": [("ekfac_linear", "kronfluence")],
    "digits": [("ekfac_1", "kronfluence"), ("ekfac", "kronfluence")],
}
"""Per task, the (ours, theirs) paired differences reported where both were scored."""


def _losses(folder: Path) -> torch.Tensor:
    from interp.store import ActivationStore

    store = ActivationStore.open(folder / "retrain")
    try:
        parts = [store.read_shard(i) for i in store.shard_indices]
    finally:
        store.close()
    seq = torch.cat([p["seq"] for p in parts])
    return torch.cat([p["loss"] for p in parts])[seq.argsort()].double()


def _masks(summary: dict) -> torch.Tensor:
    from attribution.lds import random_subsets

    task = summary["task"]
    settings = task.get("settings", task)  # LM runs nest their settings; the digits run's task is flat
    n = summary.get("n_subsets", summary.get("subsets"))
    return random_subsets(settings["n_train"], n, summary["alpha"], seed=settings["seed"])


def _scores(folder: Path, name: str) -> torch.Tensor | None:
    from safetensors.torch import load_file

    path = folder / "scores" / f"{name}.safetensors"
    return load_file(str(path))["scores"].double() if path.exists() else None


def collect(folders: dict[str, Path]) -> dict:
    """{"methods": {task: {method: entry}}, "diffs": {task: {"ours-theirs": LDSResult dict}}, "info": {task: ...}}."""
    from attribution.lds import lds_difference

    out: dict = {"methods": {}, "diffs": {}, "info": {}}
    for task, folder in folders.items():
        summary = json.loads((folder / "lds.json").read_text())
        out["methods"][task] = summary["methods"]
        out["info"][task] = {
            k: summary.get(k) for k in ("n_subsets", "subsets", "alpha", "seconds", "retrain_seconds", "skipped")
        }
        masks, losses = _masks(summary), _losses(folder)
        if (folder / "settings.json").exists():  # an LM run records its subsets' hash: the masks must be those
            from attribution.lds import masks_sha256

            if json.loads((folder / "settings.json").read_text())["subsets"]["sha256"] != masks_sha256(masks):
                raise ValueError(f"{folder}: the subsets rebuilt from lds.json are not the run's")
        out["diffs"][task] = {}
        for ours, theirs in PAIRS[task]:
            a, b = _scores(folder, ours), _scores(folder, theirs)
            if a is not None and b is not None:
                out["diffs"][task][f"{ours} - {theirs}"] = lds_difference(a, b, masks, losses).to_dict()
    return out


def markdown(res: dict) -> str:
    tasks = [t for t in TASKS if t in res["methods"]]
    lines = [
        "| method | " + " | ".join(HEADS[t] for t in tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    for label, names in ROWS:
        cells = []
        for t in tasks:
            entry = res["methods"][t].get(names.get(t, ""))
            cells.append(f"{entry['lds']:.3f} [{entry['ci95'][0]:.3f}, {entry['ci95'][1]:.3f}]" if entry else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for t in tasks:
        for pair, d in res["diffs"][t].items():
            lo, hi = d["ci95"]
            lines.append(f"- {t}: LDS({pair}) = {d['lds']:+.3f}, paired 95% CI [{lo:+.3f}, {hi:+.3f}]")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for t in TASKS:
        ap.add_argument(f"--{t}", type=Path, help=f"the {t} task's LDS folder")
    a = ap.parse_args(argv)
    folders = {t: getattr(a, t) for t in TASKS if getattr(a, t) is not None}
    if not folders:
        ap.error("give at least one of --neox, --llama, --digits")
    res = collect(folders)
    print(markdown(res))
    return res


if __name__ == "__main__":
    main()
