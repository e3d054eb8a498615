"""Read ahead: run an iterator on a background thread so the next batch is ready when the step ends.

Store reads (safetensors slices, the shuffle's gather) release the GIL, as do torch's kernels, so a
reader thread overlaps them with the training step. Exceptions from the iterator are raised in the
consumer at the item where they happened; closing the generator stops the thread.

    >>> for x in prefetch(store.iter_batches(4096, hooks=hook)):
    ...     step(x)
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Yield the items of `items` in order, produced up to `depth` ahead on a daemon thread."""
    if depth < 1:
        raise ValueError(f"prefetch depth must be >= 1, got {depth}")
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(obj) -> bool:
        while not stop.is_set():
            try:
                q.put(obj, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
        except BaseException as e:  # handed to the consumer
            put((_DONE, e))
            return
        put((_DONE, None))

    thread = threading.Thread(target=run, name="prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, err = q.get()
            if item is _DONE:
                if err is not None:
                    raise err
                return
            yield item
    finally:
        stop.set()
        thread.join(timeout=5)
