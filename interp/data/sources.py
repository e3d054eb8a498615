"""Text that is already on the machine, as documents addressed by id and read on demand.

Interpretability runs need *some* natural-ish text, but this toolkit must work without network
access. Every Python install carries megabytes of source code, English docstrings and the reference
manual's topic texts, and most Linux systems carry package documentation and licence texts; these
sources turn them into documents. The first three are the same on every machine with the same Python
version; the last depends on what is installed there.

A source lists its document ids first (sorted, so the order is the same on every machine with
the same files) and reads a document only when asked. ``build_corpus`` relies on this to shuffle
the ids and stop reading once it has enough tokens.

Source specs:

- ``"stdlib"``: the ``.py`` files of the standard library, text as is;
- ``"stdlib-docs"``: the module, class and function docstrings of those files, one document per
  module (closer to English than the code);
- ``"pydoc-topics"``: the topic texts of the Python reference manual that the standard library ships for
  ``help()`` (``pydoc_data.topics``), one document per topic: English prose fixed by the Python version;
- ``"usr-share-doc"``: plain-text files under ``/usr/share/doc`` and ``/usr/share/common-licenses``; they
  **vary with the machine's installed packages**, so results on them are not reproducible elsewhere;
- ``"file:PATH"``: one text file;
- ``"dir:PATH"``: every ``*.txt``/``*.md``/``*.py``/``*.xml`` file under a folder;
- the user's own rows: ``"jsonl:PATH[:field]"``, ``"parquet:PATH[:column]"``, ``"csv:PATH:column"``,
  ``"hf-disk:PATH[:split:column]"`` (see ``interp.data.user_sources``).

Example::

    >>> src = get_source("stdlib-docs")
    >>> doc_id, text = next(iter(src))
"""

from __future__ import annotations

import ast
import os
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path

from interp.data.text_source import TextSource
from interp.data.user_sources import USER_PREFIXES, USER_SPECS, get_user_source

__all__ = [
    "DEFAULT_SOURCE",
    "TEXT_SOURCES",
    "TextSource",
    "VALID_TEXT_SPECS",
    "dir_source",
    "file_source",
    "module_docstrings",
    "get_source",
    "pydoc_topics_source",
    "is_text_spec",
    "iter_documents",
    "stdlib_docs_source",
    "stdlib_source",
    "usr_share_doc_source",
]

DEFAULT_SOURCE = "stdlib-docs"
"""Same text on every machine with the same Python version, and English-like."""

STDLIB_SKIP_DIRS = frozenset({"site-packages", "test", "tests", "idlelib", "lib2to3", "__pycache__"})
"""Folders of the stdlib that are third-party code, test fixtures (some deliberately malformed) or
legacy tools; leaving them out keeps the text representative and the listing fast."""

STDLIB_MAX_BYTES = 200_000
"""Larger stdlib files are generated tables (e.g. ``pydoc_data/topics.py``) rather than code."""

DIR_SUFFIXES = (".txt", ".md", ".py", ".xml")
"""File types a ``dir:`` source reads."""

USR_SHARE_DOC_ROOTS = ("/usr/share/doc", "/usr/share/common-licenses")

_BINARY_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".png", ".jpg", ".gif", ".pdf", ".ico")


def _read_text(path: str) -> str:
    """UTF-8 text of a file, ``""`` if it looks binary (a NUL byte) or cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    if b"\x00" in data[:8192]:
        return ""
    return data.decode("utf-8", errors="ignore")


def _walk_files(root: str, keep: Callable[[str], bool], skip_dirs: frozenset[str] = frozenset()) -> list[str]:
    """Sorted paths of regular files under ``root`` that pass ``keep``, not entering ``skip_dirs``."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs)
        for name in files:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and keep(path):
                found.append(path)
    return sorted(found)


def _stdlib_files() -> list[str]:
    root = sysconfig.get_paths()["stdlib"]
    return _walk_files(
        root,
        lambda p: p.endswith(".py") and os.path.getsize(p) <= STDLIB_MAX_BYTES,
        STDLIB_SKIP_DIRS,
    )


def stdlib_source() -> TextSource:
    """The standard library's ``.py`` files, text as is."""
    return TextSource("stdlib", tuple(_stdlib_files()), _read_text)


def module_docstrings(source: str) -> str:
    """All docstrings of a module (module, classes, functions) in source order, blank-line separated.

    Returns ``""`` for code that does not parse or has no docstrings.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    nodes = [n for n in ast.walk(tree) if isinstance(n, kinds)]
    # ast.walk is breadth-first; sort by line so the text reads top to bottom like the module.
    nodes.sort(key=lambda n: getattr(n, "lineno", 0))
    docs = [ast.get_docstring(n) for n in nodes]
    return "\n\n".join(d for d in docs if d)


def stdlib_docs_source() -> TextSource:
    """The docstrings of the standard library, one document per module."""
    return TextSource("stdlib-docs", tuple(_stdlib_files()), lambda p: module_docstrings(_read_text(p)))


def pydoc_topics_source() -> TextSource:
    """The Python reference manual's topic texts (``pydoc_data.topics``), one document per topic, sorted by name.

    CPython generates this table from its documentation at release time and ships it for ``help("if")``;
    the text is English prose about the language (statements, operators, data model), so it is the same on
    every machine with the same Python version, whatever else is installed. It does not overlap
    ``stdlib-docs``: the module is a single generated table of strings, not docstrings, and larger than
    ``STDLIB_MAX_BYTES``, so the ``stdlib`` sources skip it (about 2% of its 8-word shingles also occur in the
    stdlib docstrings, measured on Python 3.11.7).
    """
    try:
        from pydoc_data import topics
    except ImportError as err:  # some distributions split it off the minimal Python package
        raise ValueError(
            "the 'pydoc-topics' source needs the standard library's pydoc_data module, missing from this Python; "
            "install the full standard library (on Debian: libpython3.X-stdlib) or use 'stdlib-docs'"
        ) from err
    table = topics.topics
    return TextSource("pydoc-topics", tuple(sorted(table)), lambda key: table[key])


def usr_share_doc_source() -> TextSource:
    """Plain-text package documentation and licences under ``/usr/share``; compressed files skipped.

    This text **varies with the machine's installed packages** (installing a Debian package adds its files),
    so a corpus built from it, and every number measured on it, differs from machine to machine; use
    ``pydoc-topics`` or ``stdlib-docs`` for results others should reproduce."""
    paths: list[str] = []
    for root in USR_SHARE_DOC_ROOTS:
        if os.path.isdir(root):
            paths += _walk_files(root, lambda p: not p.endswith(_BINARY_SUFFIXES))
    return TextSource("usr-share-doc", tuple(sorted(paths)), _read_text)


def file_source(path: str) -> TextSource:
    """One text file as one document."""
    if not os.path.isfile(path):
        raise ValueError(f"file not found: {path!r}; pass an existing text file as 'file:PATH'")
    return TextSource(f"file:{path}", (path,), _read_text)


def dir_source(path: str) -> TextSource:
    """Every ``*.txt``/``*.md``/``*.py``/``*.xml`` file under a folder, sorted by path."""
    if not os.path.isdir(path):
        raise ValueError(f"directory not found: {path!r}; pass an existing folder as 'dir:PATH'")
    return TextSource(f"dir:{path}", tuple(_walk_files(path, lambda p: p.endswith(DIR_SUFFIXES))), _read_text)


TEXT_SOURCES: dict[str, Callable[[], TextSource]] = {
    "stdlib": stdlib_source,
    "stdlib-docs": stdlib_docs_source,
    "pydoc-topics": pydoc_topics_source,
    "usr-share-doc": usr_share_doc_source,
}
"""Named sources without an argument; ``file:`` and ``dir:`` take a path (see ``get_source``)."""

_PATH_SOURCES: dict[str, Callable[[str], TextSource]] = {"file:": file_source, "dir:": dir_source}

VALID_TEXT_SPECS = (*TEXT_SOURCES, "file:PATH", "dir:PATH", *USER_SPECS)


def is_text_spec(spec: str) -> bool:
    """Whether ``spec`` names a text source (without checking that its path exists)."""
    return spec in TEXT_SOURCES or spec.startswith((*_PATH_SOURCES, *USER_PREFIXES))


def get_source(spec: str) -> TextSource:
    """The text source for ``spec``; raises ``ValueError`` naming the valid specs if unknown."""
    if spec in TEXT_SOURCES:
        return TEXT_SOURCES[spec]()
    for prefix, make in _PATH_SOURCES.items():
        if spec.startswith(prefix):
            return make(os.path.expanduser(spec[len(prefix) :]))
    if spec.startswith(USER_PREFIXES):
        return get_user_source(spec)
    raise ValueError(f"unknown text source {spec!r}; valid sources: {', '.join(VALID_TEXT_SPECS)}")


def iter_documents(spec: str) -> Iterator[tuple[str, str]]:
    """Yield ``(doc_id, text)`` of a source in its sorted order, skipping empty documents."""
    yield from get_source(spec)
