"""The one option vocabulary of every `interp` command, as typer option factories.

| option | meaning |
|---|---|
| `--model SPEC` | a spec (`interp models`), a local HF folder or .gguf (`PATH@N`: step N), a hub id `ORG/NAME[@REV]` |
| `--data SPEC` | a corpus: built-in (`stdlib-docs`, ...), `file:`/`dir:`, `jsonl:`/`parquet:`/`csv:`/`hf-disk:` |
| `--device auto\\|cpu\\|cuda[:N]` | where models run; `auto` (the default) takes CUDA when it is there |
| `--out DIR` | always a folder; the command names the files inside it |
| `--out-file PATH` | the one file a command writes, where it writes exactly one |
| `--overwrite` | replace finished outputs in `--out` (otherwise a finished run is refused) |
| `--restart` | start a resumable run in `--out` over (`--resume/--no-resume`: continue it, the default) |
| `--max-tokens INT`, `--max-rows INT` | sizes in tokens / rows; `--n-*` only where the unit is neither |
| `--batch-size INT` | sequences per forward pass; tokens per step only as `--batch-tokens INT` |
| `--top INT` | every top-N (edges, latents, examples) |
| `--store PATH`, `--circuit PATH` | options everywhere (a leading positional path is a hidden alias) |
| `--hooks NAME[,NAME]` | one or many hook names or globs, repeat or comma-separate |
| `--seed INT`, `--ctx-len INT` | the same meaning everywhere |
| `--device`, `--seed`, `--threads INT` | on every command that computes |
| `--debug`, `--verbose/-v`, `--quiet/-q` | on `interp` itself: tracebacks, debug lines, only warnings |

Metavars are `TEXT`, `INT`, `FLOAT`, `PATH`, `SPEC`. An old spelling stays for one version as a hidden
option read through `deprecated`, which prints where to go.
"""

from __future__ import annotations

from typing import Any

import typer

from interp.infra.devices import DEVICE_CHOICES

DEFAULT_MODEL = "smollm2-135m"  # same as interp.models.DEFAULT_MODEL, repeated so help needs no model code


def text(default: Any, *names: str, help: str, metavar: str = "TEXT", **kw: Any) -> Any:
    """A text option."""
    return typer.Option(default, *names, metavar=metavar, help=help, **kw)


def integer(default: Any, *names: str, help: str, **kw: Any) -> Any:
    """An integer option."""
    return typer.Option(default, *names, metavar="INT", help=help, **kw)


def number(default: Any, *names: str, help: str, **kw: Any) -> Any:
    """A float option."""
    return typer.Option(default, *names, metavar="FLOAT", help=help, **kw)


def path(default: Any, *names: str, help: str, **kw: Any) -> Any:
    """A path option (file or folder, as the help says)."""
    return typer.Option(default, *names, metavar="PATH", help=help, **kw)


def model(
    default: Any = DEFAULT_MODEL,
    help: str = "Model spec (`interp models`), a local HF folder / .gguf path, or a hub id ORG/NAME[@REV].",
) -> Any:
    return typer.Option(default, "--model", metavar="SPEC", help=help)


def data(default: Any = "stdlib-docs", help: str | None = None) -> Any:
    return typer.Option(
        default,
        "--data",
        metavar="SPEC",
        help=help
        or (
            "Corpus: stdlib-docs, stdlib, pydoc-topics (fixed by the Python version), usr-share-doc (varies with "
            "the machine's installed packages), file:PATH, dir:PATH, jsonl:PATH[:field], "
            "parquet:PATH[:column], csv:PATH:column, hf-disk:PATH[:split:column], synthetic:NAME."
        ),
    )


def device(default: str = "auto") -> Any:
    return typer.Option(
        default,
        "--device",
        metavar=DEVICE_CHOICES,
        help="Where the model runs: auto (CUDA when present, else CPU), cpu, cuda or cuda:N.",
    )


def out(
    default: Any = ..., help: str = "Output folder (created if needed; the command names the files inside)."
) -> Any:
    return typer.Option(default, "--out", metavar="DIR", help=help)


def overwrite() -> Any:
    return typer.Option(False, "--overwrite", help="Replace finished outputs in --out instead of refusing.")


def resume() -> Any:
    return typer.Option(
        True, "--resume/--no-resume", help="Continue an interrupted run in --out (default), or start it over."
    )


def max_tokens(default: int, help: str = "Tokens to use (whole sequences).") -> Any:
    return integer(default, "--max-tokens", help=help)


def max_rows(default: int, help: str = "Rows to use.") -> Any:
    return integer(default, "--max-rows", help=help)


def seed(default: int = 0, help: str = "Seed (data order, initialisation).") -> Any:
    return integer(default, "--seed", help=help)


def batch_size(default: int, help: str = "Sequences per forward pass.") -> Any:
    return integer(default, "--batch-size", help=help)


def hidden(*names: str, metavar: str = "TEXT", is_flag: bool = False) -> Any:
    """A deprecated spelling, hidden from --help; read it with `deprecated(...)`."""
    if is_flag:
        return typer.Option(False, *names, hidden=True)
    return typer.Option(None, *names, metavar=metavar, hidden=True)


def deprecated(old_value: Any, old: str, new: str, new_value: Any, default: Any = None) -> Any:
    """The value to use when a hidden old spelling may have been given: warns and takes it if so.

    `default` is the new option's default: giving both spellings with different values is an error.
    """
    if old_value is None or old_value is False:
        return new_value
    warn_deprecated(old, new)
    if new_value != default and new_value != old_value:
        from interp.cli.errors import CliError

        raise CliError(f"both {old} and {new} were given with different values; use only {new}")
    return old_value


def warn_deprecated(old: str, new: str) -> None:
    """Log that the spelling `old` is deprecated (a warning on stderr, shown under --quiet too)."""
    import logging

    from interp.infra import logs

    logs.ensure()
    logging.getLogger("interp.cli").warning(
        "%s is deprecated and will be removed in the next version; use %s", old, new
    )


def batch_tokens(default: int, help: str = "Tokens per step.") -> Any:
    return integer(default, "--batch-tokens", help=help)


def restart() -> Any:
    return typer.Option(
        False,
        "--restart",
        help="Start the resumable run in --out over (its checkpoint and outputs are replaced) instead of resuming it.",
    )


def sizes_list(text: str, flag: str = "--sizes") -> tuple[int, ...]:
    """Comma-separated positive whole numbers ("10,30,100"); a `ValueError` naming the flag and the bad item."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"{flag} {text!r}: {item!r} is not a positive whole number; write e.g. {flag} 10,30,100")
        out.append(int(item))
    return tuple(out)


def compute(threads_n: int | None, seed_n: int | None = None) -> None:
    """Apply `--threads` and `--seed` (torch's generators) before a command computes."""
    set_threads(threads_n)
    if seed_n is not None:
        import torch

        torch.manual_seed(seed_n)


def threads() -> Any:
    return typer.Option(None, "--threads", metavar="INT", help="torch CPU threads (default: torch's choice).")


def set_threads(n: int | None) -> None:
    """Apply `--threads` (imports torch only when given)."""
    if n:
        import torch

        torch.set_num_threads(n)


def hooks_list(values: list[str] | str | None) -> list[str]:
    """`--hooks a,b --hooks c` -> ["a", "b", "c"]."""
    if values is None:
        return []
    items = [values] if isinstance(values, str) else values
    return [h.strip() for item in items for h in item.split(",") if h.strip()]


def one_hook(values: list[str] | str | None, old: str | None = None) -> str | None:
    """The one hook of a command that reads one (`--hooks NAME`; the old `--hook NAME` with a warning)."""
    names = hooks_list(values)
    if old:
        warn_deprecated("--hook", "--hooks")
        names = names or [old]
    if len(names) > 1:
        from interp.cli.errors import CliError

        raise CliError(f"this command reads one hook, got --hooks {','.join(names)}")
    return names[0] if names else None


def positional(option_value: Any, positional_value: Any, option: str) -> Any:
    """The value of `option` (e.g. --store), which a hidden leading positional may give instead."""
    from interp.cli.errors import CliError

    if option_value is not None and positional_value is not None and option_value != positional_value:
        raise CliError(f"{option} given twice with different values ({positional_value} and {option_value})")
    value = option_value if option_value is not None else positional_value
    if value is None:
        raise CliError(f"missing {option}")
    return value
