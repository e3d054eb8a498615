"""Where the method families plug into the core's faces, through Python entry points (one group each).

- `interp.commands`: a `typer.Typer` (added as `interp NAME ...`) or a function `register(app)`.
- `interp.demo`: a function `step(model, workdir: Path) -> dict` run by `interp demo` after the core step.

The core never imports a family: it only iterates these groups.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

COMMANDS = "interp.commands"
DEMO_STEPS = "interp.demo"


def add_family_commands(app: typer.Typer) -> None:
    """Attach every installed family's CLI; a family that fails to import is reported, not fatal."""
    for ep in entry_points(group=COMMANDS):
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - one broken family must not take the CLI down
            typer.echo(f"warning: could not load command {ep.name!r} ({ep.value}): {exc}", err=True)
            continue
        if isinstance(obj, typer.Typer):
            app.add_typer(obj, name=ep.name)
        else:
            obj(app)


def demo_steps() -> list:
    """(name, step function) of every installed family's demo step, in name order."""
    return sorted(((ep.name, ep.load()) for ep in entry_points(group=DEMO_STEPS)), key=lambda p: p[0])
