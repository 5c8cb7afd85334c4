"""app/read_ahead.py: a stream read by a thread ahead of its reader, in order, bounded,
its errors raised in place, stopped when the reader stops."""

import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.read_ahead import read_ahead, read_side_by_side


class Pieces:
    """Numbered pieces that record how far they were read, which thread read them, and
    whether they were closed."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count, self.fail_at = count, fail_at
        self.made = 0
        self.closed = False
        self.threads: set[str] = set()

    def __iter__(self) -> Iterator[int]:
        return self.generate()

    def generate(self) -> Iterator[int]:
        try:
            for n in range(self.count):
                if n == self.fail_at:
                    raise RuntimeError(f"the database went away at piece {n}")
                self.threads.add(threading.current_thread().name)
                self.made += 1
                yield n
        finally:
            self.closed = True


def test_every_piece_comes_in_order_from_another_thread() -> None:
    source = Pieces(50)

    assert list(read_ahead(iter(source))) == list(range(50))
    assert source.threads == {"read-ahead"}
    assert source.closed


def test_the_thread_reads_at_most_depth_pieces_ahead_of_the_reader() -> None:
    source = Pieces(100)
    stream = read_ahead(iter(source), depth=2)

    assert next(stream) == 0
    time.sleep(0.3)  # the thread has had time to read all it may
    # One handed over, two waiting in the queue, one in hand waiting for room.
    assert source.made <= 4
    stream.close()


def test_an_error_is_raised_at_its_place_in_the_stream() -> None:
    read: list[int] = []
    with pytest.raises(RuntimeError, match="went away at piece 3"):
        for piece in read_ahead(iter(Pieces(10, fail_at=3))):
            read.append(piece)

    assert read == [0, 1, 2]


def test_a_reader_that_stops_early_stops_the_thread_and_closes_the_source() -> None:
    source = Pieces(1000)
    stream = read_ahead(iter(source), depth=1)
    assert [next(stream), next(stream)] == [0, 1]

    stream.close()

    assert source.closed
    assert source.made < 10
    assert not any(t.name == "read-ahead" for t in threading.enumerate())


def slow_reads(count: int, started: list[int], fail_at: int | None = None) -> Iterator[Any]:
    """Reads of numbered pieces that take a little while, the later ones less: run side
    by side they finish out of order. Each notes in ``started`` that it began."""

    def read(n: int) -> int:
        started.append(n)
        time.sleep(0.002 * (count - n))
        if n == fail_at:
            raise RuntimeError(f"the database went away at piece {n}")
        return n

    return (functools.partial(read, n) for n in range(count))


def test_reads_side_by_side_come_back_in_order_from_several_threads() -> None:
    started: list[int] = []
    threads: set[str] = set()

    def noted(read: Any) -> Any:
        def run() -> int:
            threads.add(threading.current_thread().name)
            return int(read())

        return run

    pieces = read_side_by_side((noted(r) for r in slow_reads(30, started)), workers=2)

    assert list(pieces) == list(range(30))
    assert len(threads) == 2 and all(t.startswith("read-side-by-side") for t in threads)


def test_reads_side_by_side_stay_at_most_depth_ahead_and_stop_with_the_reader() -> None:
    started: list[int] = []
    stream = read_side_by_side(slow_reads(1000, started), workers=2, depth=3)
    assert next(stream) == 0
    time.sleep(0.3)  # time to begin every read it may
    # The one handed over, three waiting, the one submitted before the reader was asked.
    assert len(started) <= 5

    stream.close()

    assert len(started) <= 5
    assert not any(t.name.startswith("read-side-by-side") for t in threading.enumerate())


def test_an_error_side_by_side_is_raised_at_its_place() -> None:
    read: list[int] = []
    with pytest.raises(RuntimeError, match="went away at piece 3"):
        for piece in read_side_by_side(slow_reads(10, [], fail_at=3)):
            read.append(piece)

    assert read == [0, 1, 2]
