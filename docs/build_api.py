"""Build the API reference (HTML, offline) from the docstrings of every module of the four packages: `make docs`.

    python docs/build_api.py [--out docs/api]

Every module is imported (nothing is fetched: HF_HUB_OFFLINE is set); a module that fails to import, or a
docstring pdoc cannot render, is a warning from pdoc, and this script exits 1 naming each one.
"""

from __future__ import annotations

import argparse
import os
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


def build(out: Path, names: list[str] | None = None) -> list[str]:
    """Write the reference of `names` (default: every module) under `out`; return pdoc's warnings (empty when
    every page built)."""
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
    return sorted(
        {
            str(w.message)
            for w in caught
            if "pdoc" in w.filename and not str(w.message).startswith(ignored) and ignored[0] not in str(w.message)
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "api", help="output folder (default docs/api)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    problems = build(args.out)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    n = len(list(args.out.rglob("*.html")))
    print(f"{n} pages in {args.out}" + (f", {len(problems)} problems" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
