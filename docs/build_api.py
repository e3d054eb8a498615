"""Build the API reference (HTML, offline) from the docstrings of every module of the four packages: `make docs`.

    python docs/build_api.py [--out docs/api]

Every module is imported (nothing is fetched: HF_HUB_OFFLINE is set); a module that fails to import, or a
docstring pdoc cannot render, is a warning from pdoc, and this script exits 1 naming each one.

An annotation that another package owns (a member our class inherits from transformers' `PreTrainedModel`, say)
is that package's business: when pdoc fails to evaluate its `TYPE_CHECKING` imports, the page shows the annotation
as written and the build prints a note, not an error. The same failure in one of our own annotations fails it.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("interp", "sae", "circuits", "attribution")
SKIP = ("interp.__main__",)


def module_names(root: Path = ROOT) -> list[str]:
    """Dotted names of every module of the packages, packages first."""
    names = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            if name not in SKIP:
                names.append(name)
    return names


_ANNOTATED = re.compile(r" type annotation for (?P<name>[\w.]+?)(?::| after | Import of |\. Import )")


def owner_module(fullname: str) -> str | None:
    """The module that defines what `fullname` names: for a class member, the module of the class in the MRO
    whose body holds it; for a function or class, its own `__module__`. None when the name does not resolve."""
    parts = fullname.split(".")
    cut = len(parts)
    while cut and (obj := _import(".".join(parts[:cut]))) is None:
        cut -= 1
    if not cut:
        return None
    owner = obj.__name__
    for attr in parts[cut:]:
        if inspect.isclass(obj):
            holds = [k for k in obj.__mro__ if attr in vars(k) or attr in vars(k).get("__annotations__", {})]
            owner = (holds or [obj])[0].__module__
        obj = getattr(obj, attr, None)
        if inspect.isclass(obj) or inspect.isroutine(obj):
            owner = obj.__module__ or owner
    return owner


def _import(name: str):
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def is_ours(message: str, own: tuple[str, ...]) -> bool:
    """Whether a pdoc warning concerns code of ours: everything but an annotation another package owns."""
    m = _ANNOTATED.search(message)
    if not m:
        return True
    owner = owner_module(m.group("name"))
    return owner is None or owner.split(".")[0] in own


def build(
    out: Path, names: list[str] | None = None, own: tuple[str, ...] = PACKAGES, notes: list | None = None
) -> list[str]:
    """Write the reference of `names` (default: every module) under `out`; return pdoc's warnings about our own
    code (empty when every page built). Warnings about annotations that other packages own (`own` names ours)
    are appended to `notes` when given."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import pdoc

    pdoc.render.configure(docformat="markdown", footer_text="interp-toolkit API reference", search=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pdoc.pdoc(*(names or module_names()), output_directory=out)
        except Exception as e:  # a module named on the command line that cannot be imported
            return [f"{type(e).__name__}: {e}"]
    # pdoc walks the sub-modules of a package it is given as well: a module met twice is not a problem. Nor is an
    # annotation it cannot evaluate (a NamedTuple's fields under `from __future__ import annotations`): the page
    # shows the annotation as written.
    ignored = ("has already been added", "Error parsing type annotation")
    found = {
        str(w.message)
        for w in caught
        if "pdoc" in w.filename and not str(w.message).startswith(ignored) and ignored[0] not in str(w.message)
    }
    theirs = {m for m in found if not is_ours(m, own)}
    if notes is not None:
        notes.extend(sorted(theirs))
    return sorted(found - theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "api", help="output folder (default docs/api)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    notes: list[str] = []
    problems = build(args.out, notes=notes)
    for n in notes:
        print(f"note (another package's annotation, shown as written): {n}", file=sys.stderr)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    n = len(list(args.out.rglob("*.html")))
    print(f"{n} pages in {args.out}" + (f", {len(problems)} problems" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
