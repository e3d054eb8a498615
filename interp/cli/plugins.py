"""Where the method families plug into the core's faces, through Python entry points (one group each).

- `interp.commands`: a `typer.Typer` (added as `interp NAME ...`) or a function `register(app)`.
- `interp.demo`: a function `step(model, workdir: Path) -> dict` run by `interp demo` after the core step.

The core never imports a family, and `interp --help` imports none either: `LazyGroup` lists command
names from the entry-point metadata and their one-line help from the first line of the module's
docstring (read with `ast`, not imported); a command's module is imported only when that command runs
(or its own `--help` is asked for). Every command then runs under `errors.run_guarded`.

A `--help` line does not run the family package's `__init__` either (`sae/__init__.py` imports torch and
sae-lens to register its architectures): the package is put in `sys.modules` unexecuted (`import_deferred`),
its `cli` module is imported on it, and the help is printed. Its `__init__` runs as soon as anything asks the
package for a name or a command's body starts, and a help-only line that needed neither leaves `sys.modules`
as it found it (`undo_deferred`). So `interp sae --help` costs what `interp --help` costs, plus typer building
the family's options.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from interp.cli import errors
from interp.cli.entry_points import entry_points

COMMANDS = "interp.commands"
DEMO_STEPS = "interp.demo"
METAVARS = {"str": "TEXT", "int": "INT", "float": "FLOAT", "Path": "PATH", "bool": "BOOLEAN"}
"""Python type of an option -> metavar shown by --help, for options whose module gave none."""


@dataclass(frozen=True)
class LazyCommand:
    """A command known by name and import target, loaded on first use."""

    name: str
    target: str
    """"module:attr": a `typer.Typer`, or `register(app)` that adds the command to an app."""

    def short_help(self) -> str:
        """First line of the target module's docstring, without importing it ("" if none)."""
        try:
            file = module_file(self.target.partition(":")[0])
            if file is None:
                return ""
            doc = module_docstring(file.read_text(encoding="utf-8"))
        except (ImportError, OSError, SyntaxError, ValueError):
            return ""
        line = doc.strip().splitlines()[0] if doc.strip() else ""
        line = re.sub(r"^`[^`]*`:\s*", "", line)  # "`interp sae ...`: train ..." -> "train ..."
        return line[:1].upper() + line[1:]

    def load(self, defer_package: bool = False) -> Any:
        """The click command of this target (imports the module; with `defer_package`, without running its
        top-level package's `__init__` until the command runs: see `import_deferred`)."""
        module, _, attr = self.target.partition(":")
        obj = getattr(import_deferred(module) if defer_package else importlib.import_module(module), attr)
        if isinstance(obj, typer.Typer):
            cmd = typer.main.get_command(obj)
        else:  # register(app): add to a scratch app and take the command it added
            scratch = typer.Typer()
            obj(scratch)
            group = typer.main.get_group(scratch)
            cmd = group.commands.get(self.name) or next(iter(group.commands.values()))
        cmd.name = self.name
        top = module.split(".")[0]
        if top in _DEFERRED:
            finish_first(cmd, top)
        return normalise(cmd)


_DEFERRED: dict[str, set[str]] = {}
"""Top-level packages put in `sys.modules` without running their `__init__` -> the modules present before."""


def import_deferred(module: str) -> Any:
    """Import `module` (e.g. `sae.cli`) with its top-level package in `sys.modules` but its `__init__` not run yet.

    The package runs its `__init__` (`finish_deferred`) on the first name asked of it (`from sae import ARCHS`)
    or when a command loaded from it starts (`finish_first`). A module that is itself top-level, a package
    already imported, or one that is not a plain folder package is imported as usual.
    """
    top = module.split(".")[0]
    if top == module or top in sys.modules:
        return importlib.import_module(module)
    spec = importlib.util.find_spec(top)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return importlib.import_module(module)
    before = set(sys.modules)
    package = importlib.util.module_from_spec(spec)

    def __getattr__(name: str) -> Any:  # PEP 562: only names the package does not hold yet come here
        if name.startswith("__"):
            raise AttributeError(name)
        finish_deferred(top)
        return getattr(sys.modules[top], name)

    package.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[top] = package
    _DEFERRED[top] = before
    try:
        return importlib.import_module(module)
    except BaseException:
        undo_deferred(top)
        raise


def finish_deferred(top: str) -> None:
    """Run the `__init__` of a package that `import_deferred` left unexecuted (once; a no-op otherwise)."""
    if _DEFERRED.pop(top, None) is None:
        return
    package = sys.modules[top]
    package.__dict__.pop("__getattr__", None)
    try:
        package.__spec__.loader.exec_module(package)
    except BaseException:
        sys.modules.pop(top, None)  # as a failed import does
        raise


def undo_deferred(top: str | None = None) -> None:
    """Forget a deferred package (all of them by default) whose `__init__` never ran, and the modules imported
    under it, so a later `import` runs it as usual."""
    for name in [top] if top else list(_DEFERRED):
        before = _DEFERRED.pop(name, None)
        if before is None:
            continue
        for mod in [m for m in sys.modules if m not in before and (m == name or m.startswith(name + "."))]:
            del sys.modules[mod]


def finish_first(cmd: Any, top: str) -> None:
    """Make every callback of `cmd` (and of its sub-commands) run the deferred package's `__init__` first; a
    group's own callback does not when it only passes on to a sub-command (`interp attribute show --help`)."""
    seen: dict[str, Any] = {}
    if getattr(cmd, "commands", None) is not None:
        group_invoke = cmd.invoke

        def invoke(ctx: Any) -> Any:
            seen["ctx"] = ctx  # click sets ctx.invoked_subcommand before it calls the group's callback
            return group_invoke(ctx)

        cmd.invoke = invoke
    if getattr(cmd, "callback", None) is not None:
        body = cmd.callback

        @functools.wraps(body)
        def callback(*args: Any, **kw: Any) -> Any:
            if getattr(seen.get("ctx"), "invoked_subcommand", None) is None:
                finish_deferred(top)
            return body(*args, **kw)

        cmd.callback = callback
    for sub in getattr(cmd, "commands", {}).values():
        finish_first(sub, top)


LEADING_DOC = re.compile(r'\A(?:[ \t]*(?:#[^\n]*)?\n)*[ \t]*[rRuU]?("""|\'\'\')(.*?)\1', re.DOTALL)
"""A module's leading triple-quoted string, after blank and comment lines."""


def module_docstring(source: str) -> str:
    """The module docstring of `source`: its leading string if it is a plain triple-quoted one (a regex,
    ~100x cheaper than parsing the file), else what `ast` says."""
    match = LEADING_DOC.match(source)
    if match and "\\" not in match.group(2):
        return match.group(2).strip()
    import ast

    return ast.get_docstring(ast.parse(source)) or ""


def module_file(module: str) -> Path | None:
    """The source file of a module, found without running any package's `__init__`.

    (`importlib.util.find_spec("sae.cli")` would import `sae`, and with it torch.)
    """
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)  # a top-level spec is found without executing the package
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    for folder in spec.submodule_search_locations or []:
        base = Path(folder, *rest)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _false_default(option: Any) -> Any:
    """A `--help` flag that defaults to False rather than None: typer coerces a flag's non-bool value through
    pydantic (~0.1 s of imports), which `interp sae train --help` would pay for the unused `--help` of `interp`
    and of `interp sae`."""
    if option is not None and option.default is None:
        option.default = False
    return option


def normalise(cmd: Any) -> Any:
    """Plain help text (no rich import, no `<str>` metavars, no pydantic for `--help`) for a command and its
    sub-commands."""
    if hasattr(cmd, "rich_markup_mode"):
        cmd.rich_markup_mode = None
    if hasattr(cmd, "get_help_option"):
        own = cmd.get_help_option
        cmd.get_help_option = lambda ctx: _false_default(own(ctx))
    for param in getattr(cmd, "params", []):
        if getattr(param, "metavar", "x") is None and not getattr(param, "is_flag", False) and hasattr(param, "bare_type"):
            try:
                bare = param.bare_type()
            except Exception:  # noqa: BLE001 - a type typer cannot name keeps its own display
                continue
            many = bare.startswith("list[")
            bare = bare.removeprefix("list[").removesuffix("]")
            param.metavar = METAVARS.get(bare, bare.upper()) + ("..." if many else "")
    for sub in getattr(cmd, "commands", {}).values():
        normalise(sub)
    return cmd


def discover(core: tuple[str, ...]) -> dict[str, LazyCommand]:
    """Core commands in `interp/cli/<name>.py` (each with `register(app)`), then the families' entry points."""
    found: dict[str, LazyCommand] = {}
    for name in core:
        if module_file(f"interp.cli.{name}") is not None:
            found[name] = LazyCommand(name, f"interp.cli.{name}:register")
    for name, target in sorted(entry_points(COMMANDS)):
        found.setdefault(name, LazyCommand(name, target))
    return found


class LazyGroup(TyperGroup):
    """The root `interp` group: eager core commands plus lazily imported ones; every command guarded.

    `--debug` is taken out of the arguments wherever it appears, so `interp cache ... --debug` works.
    """

    lazy: dict[str, LazyCommand] = {}
    """Set by `interp.cli.main` before the group is built."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._loaded: dict[str, Any] = {}
        self._help_only = False

    def get_help_option(self, ctx: Any) -> Any:
        return _false_default(super().get_help_option(ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(n for n in self.lazy if n not in self.commands)]

    def get_command(self, ctx: Any, name: str) -> Any:
        if self.commands.get(name) is not None:
            return self.commands[name]
        if name not in self.lazy:
            return None
        if name not in self._loaded:
            try:
                self._loaded[name] = self.lazy[name].load(defer_package=self._help_only)
            except Exception as exc:  # noqa: BLE001 - one broken family must not take the CLI down
                if errors.debug_enabled():
                    raise
                errors.fail(f"could not load the command {name!r} ({self.lazy[name].target}): {exc}; "
                            "rerun with --debug for the traceback")
        return self._loaded[name]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(n, c.get_short_help_str(80)) for n, c in self.commands.items() if not c.hidden]
        rows += [(n, c.short_help()) for n, c in self.lazy.items() if n not in self.commands]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        saved = self.commands
        self.commands = {**{n: None for n in self.lazy}, **saved}  # typo suggestions see every name
        try:
            return super().resolve_command(ctx, args)
        finally:
            self.commands = saved

    def invoke(self, ctx: Any) -> Any:
        return errors.run_guarded(lambda: super(LazyGroup, self).invoke(ctx))

    def main(self, args: Any = None, *a: Any, **kw: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        cut = args.index("--") if "--" in args else len(args)
        errors.set_debug("--debug" in args[:cut] or errors.debug_from_env())
        args = [x for i, x in enumerate(args) if not (i < cut and x == "--debug")]
        self._help_only = "--help" in args[:cut]  # nothing runs: family packages' __init__ can wait
        try:
            return super().main(args, *a, **kw)
        finally:
            if self._help_only:
                undo_deferred()


def demo_steps() -> list:
    """(name, step function) of every installed family's demo step, in name order."""
    steps = {}
    for name, target in entry_points(DEMO_STEPS):
        module, _, attr = target.partition(":")
        steps.setdefault(name, getattr(importlib.import_module(module.strip()), attr.strip()))
    return sorted(steps.items())
