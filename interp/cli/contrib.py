"""`interp contrib`: the 47 catalogue papers, and each implemented paper's experiment.

    interp contrib list                 # every paper: cluster, module, status and qualifier, one-line result
    interp contrib list --status partial  # only the papers of one status (see `Status` in the registry)
    interp contrib list --controls      # also each paper's control (what isolates its ingredient) and seeds
    interp contrib list --json
    interp contrib run CoupledPI --quick  # a seconds-long run; without --quick the README's full run

Both read `interp.contrib.registry`, the single source of the README index. Nothing heavy is imported
until a command runs (the registry is plain data; an experiment imports torch when it starts).
"""

from __future__ import annotations

import json

import typer

contrib_app = typer.Typer(add_completion=False, no_args_is_help=True, help="The contrib papers: list them, run one.")


@contrib_app.command("list")
def list_papers(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    status: str | None = typer.Option(None, "--status", help="Only papers of this status: reproduced, partial, "
                                      "'not reproduced', 'metric only', 'not testable here'."),
    controls: bool = typer.Option(False, "--controls", help="Also print each paper's control (the ablation and "
                                  "baseline that isolate its ingredient) and what its seeds are."),
) -> None:
    """Every catalogue paper with its cluster, module, status (and its qualifier) and one-line result;
    with --controls also the control behind the status and the seeds (model trainings or data splits)."""
    from interp.cli.main import fail
    from interp.contrib.registry import PAPERS, papers_with_status

    try:
        papers = PAPERS if status is None else papers_with_status(status)
    except ValueError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps([{"name": p.name, "cluster": p.cluster, "module": p.module, "status": p.status.value,
                                "qualifier": p.qualifier, "result": p.result, "experiment": p.experiment,
                                "control": p.control, "seeds": p.seeds}
                               for p in papers], indent=1))
        return
    w = max(len(p.name) for p in PAPERS)
    for p in papers:
        where = p.module or f"({p.cluster}, planned)"
        typer.echo(f"{p.name:<{w}}  {p.cluster:<16} {where:<40} {p.status} ({p.qualifier})")
        if p.result:
            typer.echo(f"{'':<{w}}  {p.result}")
        if controls:
            typer.echo(f"{'':<{w}}  control: {p.control}")
            typer.echo(f"{'':<{w}}  seeds: {p.seeds}")
    if status is not None:
        typer.echo(f"{len(papers)} of {len(PAPERS)} papers have status {status.strip().lower()!r}.")
        return
    done = sum(p.implemented for p in PAPERS)
    typer.echo(f"{done} of {len(PAPERS)} papers implemented; `interp contrib run NAME --quick` runs one.")


@contrib_app.command("run")
def run_paper(
    name: str = typer.Argument(..., help="Paper short name (see `interp contrib list`)."),
    quick: bool = typer.Option(False, "--quick", help="A seconds-long run (small sizes, one seed)."),
) -> None:
    """Run a paper's experiment and print its result table (the full run takes up to a few minutes)."""
    import runpy
    import sys

    from interp.cli.main import fail
    from interp.contrib.registry import get_paper

    try:
        paper = get_paper(name)
        if paper.experiment is None:
            raise ValueError(f"{paper.name} is not implemented yet (planned in contrib/{paper.cluster}); "
                             "`interp contrib list` shows the implemented papers")
    except ValueError as exc:
        fail(exc)
    args = list(paper.quick) if quick else []
    saved = sys.argv
    sys.argv = [paper.experiment, *args]
    try:
        runpy.run_module(paper.experiment, run_name="__main__", alter_sys=False)
    except ModuleNotFoundError as exc:  # an optional dependency (scikit-learn for the contrib extra, ...)
        from interp.infra.extras import missing_module_hint

        hint = missing_module_hint(exc.name or "", paper.name)
        if hint is None:
            raise
        fail(hint)
    except SystemExit as exc:  # an experiment's argparse exiting
        if exc.code not in (0, None):
            raise typer.Exit(int(exc.code) if isinstance(exc.code, int) else 2) from None
    finally:
        sys.argv = saved


def register(app: typer.Typer) -> None:
    app.add_typer(contrib_app, name="contrib")
