"""The probes' step of `interp demo`: a small probe run on the demo model, report and figures under `workdir/probes`."""

from __future__ import annotations

import json
from pathlib import Path

from interp.probes.figures import write_figures
from interp.probes.report import ProbeConfig, headline, run_probes

DEMO_CONFIG = ProbeConfig(
    n_seq=8,
    ctx_len=64,
    n_calib=4,
    n_eval=4,
    stream_ctx=256,
    stream_window=64,
    stream_sinks=(0, 4),
    n_stream=2,
    cross=False,
)


def step(model, workdir: Path) -> dict:
    """Run the probes with `DEMO_CONFIG`; returns the headline numbers and where the files are."""
    folder = Path(workdir) / "probes"
    report = run_probes(model, DEMO_CONFIG, progress=False, log=lambda s: None)
    report["figures"] = write_figures(report, folder)
    report["headline"] = headline(report)
    (folder / "report.json").write_text(json.dumps(report, indent=1, default=str))
    return {**report["headline"], "report": str(folder / "report.json"), "figures": report["figures"]}
