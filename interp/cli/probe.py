"""`interp probe`: massive activations and attention sinks of a model, as a JSON report and HTML figures.

    interp probe --model smollm2-135m --data stdlib-docs --out runs/probes/smollm2
"""

from __future__ import annotations

import json
from typing import Optional
from pathlib import Path

import typer

from interp.cli import options as O


def probe(
    model: str = O.model(),
    data: str = O.data(),
    out: str = O.out(help="Output folder: report.json and the figures (*.html)."),
    n_seq: int = typer.Option(32, help="Sequences scanned."),
    ctx_len: int = typer.Option(128, help="Tokens per sequence."),
    bos: bool = typer.Option(False, help="Put the tokenizer's BOS token at position 0 of every row (Gemma expects it)."),
    n_calib: int = typer.Option(16, help="Calibration sequences for the mean ablation."),
    n_eval: int = typer.Option(16, help="Sequences for the ablation perplexities."),
    abs_threshold: float = typer.Option(100.0, help="Massive: |h| above this ..."),
    ratio_threshold: float = typer.Option(1000.0, help="... and above this many times the layer's median |h|."),
    eps: float = typer.Option(0.3, help="Sink threshold on the mean attention to the first token (Gu et al.)."),
    gu_len: int = typer.Option(64, help="T of Gu et al.'s Sink_1 (natural, random, repeated-token sequences)."),
    stream_ctx: int = typer.Option(512, help="Sequence length of the StreamingLLM test (0 skips it)."),
    stream_window: int = typer.Option(128, help="Attention window of the StreamingLLM test."),
    stream_sinks: str = typer.Option("0,1,4", help="Numbers of initial tokens kept, comma-separated."),
    n_stream: int = typer.Option(4, help="Sequences of the StreamingLLM test."),
    batch_size: int = typer.Option(8, help="Sequences per forward."),
    seed: int = typer.Option(0, help="Corpus shuffling seed."),
    cross: bool = typer.Option(True, help="Run the cross ablations (sinks without massive activations and the reverse)."),
    ablation_layer: str = typer.Option("onset", help="Intervention layer: onset (first layer with massive entries in "
                                       ">= half the sequences), first (any entry), or a layer number."),
    device: str = O.device(),
    threads: Optional[int] = O.threads(),
    overwrite: bool = O.overwrite(),
    force: bool = O.hidden("--force", is_flag=True),
) -> None:
    """Probe a model for massive activations and attention sinks; writes report.json and figures."""
    from interp.cli.main import fail
    from interp.probes.figures import write_figures
    from interp.probes.report import ProbeConfig, headline, run_probes
    from interp.store.atomic import atomic_write_bytes

    from interp.cli.errors import check_out_dir

    overwrite = O.deprecated(force, "--force", "--overwrite", overwrite, False)
    folder = check_out_dir(out)
    O.set_threads(threads)
    try:
        try:
            sinks = tuple(int(s) for s in stream_sinks.split(",") if s.strip())
        except ValueError:
            raise ValueError(f"--stream-sinks takes comma-separated token counts such as 0,1,4, got {stream_sinks!r}") from None
        cfg = ProbeConfig(data=data, ctx_len=ctx_len, bos=bos, n_seq=n_seq, n_calib=n_calib, n_eval=n_eval,
                          abs_threshold=abs_threshold, ratio_threshold=ratio_threshold, eps=eps, gu_len=gu_len,
                          stream_ctx=stream_ctx, stream_window=stream_window, stream_sinks=sinks, n_stream=n_stream,
                          batch_size=batch_size, seed=seed, cross=cross,
                          ablation_layer=ablation_layer)
        if (folder / "report.json").exists() and not overwrite:
            raise FileExistsError(f"{folder / 'report.json'} exists; pass --overwrite to replace it or choose another --out")
        from interp.models import load_model

        hooked = load_model(model, device=device)
        report = run_probes(hooked, cfg, log=lambda s: typer.echo(s, err=True))
    except (ValueError, FileNotFoundError, FileExistsError, TypeError, RuntimeError) as exc:
        fail(exc)
    report["figures"] = write_figures(report, folder)
    report["headline"] = headline(report)
    atomic_write_bytes(folder / "report.json", json.dumps(report, indent=1, default=str).encode())
    typer.echo(json.dumps(report["headline"], indent=1))
    typer.echo(f"report: {folder / 'report.json'}; figures: {', '.join(report['figures'].values())}")


def register(app: typer.Typer) -> None:
    """Add `interp probe` to the core CLI."""
    app.command("probe")(probe)
