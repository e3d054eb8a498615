"""`TextSource`: a named, sorted list of documents read on demand; what every text spec (`stdlib-docs`, `file:`,
`jsonl:`, ...) becomes, in `interp.data.sources` and `interp.data.user_sources`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class TextSource:
    """A named, sorted list of documents whose text is read on demand.

    Iterating yields ``(doc_id, text)`` in ``doc_ids`` order; documents whose text is empty
    (a module without docstrings, a binary file) are skipped.
    """

    spec: str
    """The spec this source was made from, e.g. ``"dir:/data/notes"``."""
    doc_ids: tuple[str, ...]
    """Document ids (paths), sorted."""
    load: Callable[[str], str]
    """Reads one document's text; returns ``""`` for documents with no usable text."""

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for doc_id in self.doc_ids:
            text = self.load(doc_id)
            if text:
                yield doc_id, text

    def __len__(self) -> int:
        return len(self.doc_ids)
