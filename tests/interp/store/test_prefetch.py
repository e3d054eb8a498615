import threading

import pytest

from interp.store import prefetch


def test_prefetch_keeps_order_and_ends():
    assert list(prefetch(range(50), depth=3)) == list(range(50))
    assert list(prefetch(iter(()))) == []


def test_prefetch_raises_where_the_iterator_failed():
    def gen():
        yield 1
        yield 2
        raise KeyError("bad row")

    it = prefetch(gen())
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(KeyError, match="bad row"):
        next(it)


def test_closing_stops_the_reader_thread():
    def endless():
        i = 0
        while True:
            yield i
            i += 1

    before = threading.active_count()
    it = prefetch(endless(), depth=2)
    assert [next(it) for _ in range(5)] == [0, 1, 2, 3, 4]
    it.close()
    assert threading.active_count() == before


def test_bad_depth():
    with pytest.raises(ValueError, match="depth"):
        next(prefetch(range(3), depth=0))
