"""app/read_ahead.py: a stream read by a thread ahead of its reader, in order, bounded,
its errors raised in place, stopped when the reader stops."""

import threading
import time
from collections.abc import Iterator

import pytest

from app.read_ahead import read_ahead


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
