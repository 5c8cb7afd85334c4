"""Reading ahead: a stream's next pieces are made in a thread of their own while the current
one is being sent, so that the database's work overlaps the response's.

A pull of labels is mostly waiting: on the database for a chunk, then on the client for the
bytes. Done in turn, the two waits add up; read ahead, the longer one is the pull's time.
The thread holds at most ``depth`` pieces, so memory stays bounded however large the pull.

Where the pieces can be read independently (``read_side_by_side``), several threads read
them at once: on Postgres each through a connection, and so a server process, of its own.
"""

import queue
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar, cast

Piece = TypeVar("Piece")

JOIN_TIMEOUT_S = 5.0
"""How long closing the stream waits for the reading thread to finish its piece."""
_POLL_S = 0.1


@dataclass(frozen=True)
class _Failed:
    """The error that ended the reading thread, to be raised in the reader's."""

    error: BaseException


_END = object()
"""Handed over after the last piece."""


def read_ahead(pieces: Iterator[Piece], depth: int = 2) -> Generator[Piece, None, None]:
    """``pieces``, in order, read by a thread up to ``depth`` pieces ahead. An error there
    is raised here, at its place in the stream; closing this generator early (a client that
    went away) stops the thread and closes ``pieces`` in it."""
    ahead: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def hand_over(item: object) -> bool:
        while not stop.is_set():
            try:
                ahead.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for piece in pieces:
                if not hand_over(piece):
                    return
            hand_over(_END)
        except BaseException as error:  # handed over: raised in the reader's thread
            hand_over(_Failed(error))
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=read, name="read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = ahead.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield cast(Piece, item)
    finally:
        stop.set()
        thread.join(timeout=JOIN_TIMEOUT_S)


def read_side_by_side(
    reads: Iterable[Callable[[], Piece]], workers: int = 2, depth: int = 3
) -> Generator[Piece, None, None]:
    """What each of ``reads`` returns, in order; ``workers`` threads run them, at most
    ``depth`` ahead of the reader. An error is raised at its place in the stream; closing
    this generator early cancels the reads not begun and waits for those running."""
    pending: deque[Future[Piece]] = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="read-side-by-side") as pool:
        try:
            for read in reads:
                pending.append(pool.submit(read))
                if len(pending) > depth:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
