"""`interp demo` (what `make demo` runs): the main job on the default model, then each family's demo step.

Core step: load the model (converting its GGUF once), cache three hook points of a middle layer over
the Python-docstring corpus into a store, verify it, and print a short report.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from interp.cache.caching import CacheConfig, cache_activations
from interp.cli.plugins import demo_steps
from interp.models import load_model

CORE_STEPS = ("interp.probes.demo",)
"""Core modules with a `step(model, workdir) -> dict` for the demo, run when present."""


def core_demo_steps() -> list:
    import importlib

    steps = []
    for path in CORE_STEPS:
        try:
            steps.append((path.split(".")[-2], importlib.import_module(path).step))
        except ModuleNotFoundError as exc:
            if not path.startswith(str(exc.name)):
                raise
    return steps


def run_demo(model_spec: str, out: str, max_tokens: int = 16_384) -> dict:
    """Run the demo; returns (and prints) its report."""
    workdir = Path(out)
    t0 = time.perf_counter()
    model = load_model(model_spec)
    load_s = time.perf_counter() - t0
    print(f"loaded {model} in {load_s:.1f} s")
    mid = model.n_layers // 2
    hooks = [f"blocks.{mid}.hook_resid_post", f"blocks.{mid}.hook_attn_out", f"blocks.{mid}.hook_mlp_out"]
    cfg = CacheConfig(out=str(workdir / "store"), model=model_spec, hooks=hooks, max_tokens=max_tokens, ctx_len=128)
    store, report = cache_activations(cfg, model=model)
    verified = store.verify()
    if not verified.ok:
        raise ValueError(str(verified))
    report = {"model": model.provenance, "load_seconds": round(load_s, 2), "cache": report}
    report["cache"]["tokens_per_second"] = round(report["cache"]["tokens"] / max(report["cache"]["seconds"], 1e-9))
    first = store.get_rows(slice(0, 1))[hooks[0]]
    report["cache"]["sample"] = {"hook": hooks[0], "row0_norm": round(float(first.norm()), 3)}
    for name, step in core_demo_steps() + demo_steps():
        print(f"demo step: {name}")
        report[name] = step(model, workdir)
    (workdir / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report, indent=1, default=str))
    print(f"report written to {workdir / 'report.json'}")
    return report
