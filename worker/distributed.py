"""The worker under torchrun: rank 0 does the database work and tells the other ranks.

``torchrun --nproc-per-node N -m worker`` starts N processes, one per GPU. Rank 0 claims
the run and does every database step; what the other ranks need (whether to run or stop,
the training examples, the checkpoint to score with) reaches them as ``torch.distributed``
object broadcasts on a gloo group of their own, so that the NCCL group of a GPU job
carries training alone and its timeout never fires while rank 0 works alone. Every rank
trains (DDP) and scores its share of the pool.

Failures: a failure in rank 0's own work reaches the ranks waiting for it as
``RankFailed``. A failure on another rank is reported through torchrun's store, where a
thread on rank 0 reads it even while rank 0's main thread waits in a collective that the
failed rank will never join (NCCL would wait for it until its timeout).

Without torchrun (no WORLD_SIZE, or 1) ``SINGLE`` stands for the one process: every
method does its work directly and nothing is exchanged.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import PrefixStore, Store
from torch.distributed.rendezvous import rendezvous

CONTROL_TIMEOUT = timedelta(hours=2)
"""How long the other ranks wait for rank 0 working alone (grading, evaluating, writing a
checkpoint, idling between polls) before they give up."""

WATCH_SECONDS = 1.0
"""How often rank 0 looks for failures that other ranks reported."""

T = TypeVar("T")
Item = TypeVar("Item")
Result = TypeVar("Result")


class RankFailed(Exception):
    """Rank 0 failed in work that this rank was waiting for."""


@dataclass(frozen=True)
class _Failure:
    """What rank 0 broadcasts instead of a result when its work failed."""

    description: str


class Ranks:
    """This process's place among the worker's processes: the only one, or one of torchrun's."""

    def __init__(
        self,
        rank: int = 0,
        world_size: int = 1,
        control: dist.ProcessGroup | None = None,
        store: Store | None = None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self._control = control
        self._store = store
        self._in_main_work = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def on_main(self, work: Callable[[], T]) -> T:
        """``work()`` on rank 0, its result on every rank; its failure fails every rank.

        Every rank must call this at the same point. Rank 0 re-raises the original error;
        the others raise RankFailed. Called again inside ``work`` it simply runs there.
        """
        if self.world_size == 1 or self._in_main_work:
            return work()
        if not self.is_main:
            value = self._broadcast(None)
            if isinstance(value, _Failure):
                raise RankFailed(value.description)
            return value  # type: ignore[no-any-return]
        self._in_main_work = True
        try:
            value = work()
        except Exception as error:
            self._broadcast(_Failure(f"rank 0 failed: {type(error).__name__}: {error}"))
            raise
        finally:
            self._in_main_work = False
        self._broadcast(value)
        return value

    def _broadcast(self, value: Any) -> Any:
        message = [value]
        dist.broadcast_object_list(message, src=0, group=self._control)
        return message[0]

    def map_sharded(
        self, items: Sequence[Item], work: Callable[[Sequence[Item]], list[Result]]
    ) -> list[Result]:
        """``work`` on each rank's share of ``items`` (which every rank holds alike).

        Rank 0 gets every result, in the order of ``items``; the other ranks get [].
        """
        if self.world_size == 1:
            return work(items)
        done = work(items[self.rank :: self.world_size])
        parts: list[Any] | None = [None] * self.world_size if self.is_main else None
        dist.gather_object(done, parts, dst=0, group=self._control)
        if parts is None:
            return []
        merged: list[Any] = [None] * len(items)
        for rank, part in enumerate(parts):
            merged[rank :: self.world_size] = part
        return merged

    def report_failure(self, scope: str, error: str) -> None:
        """Tell rank 0 that this rank failed; the store still works when collectives do not."""
        assert self._store is not None and not self.is_main
        self._store.set(_failure_key(scope, self.rank), error)

    def with_reported_failures(self, scope: str, error: str) -> str:
        """Rank 0's ``error`` with what the other ranks reported under ``scope``."""
        if self.world_size == 1:
            return error
        return _describe({0: error} | self._reported_failures(scope))

    def _reported_failures(self, scope: str) -> dict[int, str]:
        assert self._store is not None
        keys = {rank: _failure_key(scope, rank) for rank in range(1, self.world_size)}
        return {
            rank: self._store.get(key).decode()
            for rank, key in keys.items()
            if self._store.check([key])
        }

    @contextmanager
    def failures_watched(self, scope: str, record: Callable[[str], object]) -> Iterator[None]:
        """While the block runs, rank 0 passes to ``record`` the first failures reported.

        A thread watches: rank 0's main thread may be stuck in a collective with the
        failed rank, which only torchrun ends, by killing it.
        """
        if self.world_size == 1 or not self.is_main:
            yield
            return
        finished = threading.Event()

        def watch() -> None:
            while not finished.wait(WATCH_SECONDS):
                failures = self._reported_failures(scope)
                if failures:
                    record(_describe(failures))
                    return

        watcher = threading.Thread(target=watch, name=f"{scope}-failures", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            finished.set()
            watcher.join()

    def close(self) -> None:
        if self.world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()


SINGLE = Ranks()
"""The worker as one process (``python -m worker``)."""


def _failure_key(scope: str, rank: int) -> str:
    return f"{scope}/failed/{rank}"


def _describe(failures: dict[int, str]) -> str:
    return "\n".join(f"rank {rank}: {error}" for rank, error in sorted(failures.items()))


def start(device: torch.device) -> Ranks:
    """Join torchrun's ranks (NCCL when training on CUDA, gloo on the CPU), or SINGLE.

    ``device`` is this rank's training device (``cuda:LOCAL_RANK`` under torchrun).
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return SINGLE
    store, rank, world_size = next(rendezvous("env://"))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if device.type == "cuda" else "gloo",
        store=PrefixStore("steplabel/training", store),
        rank=rank,
        world_size=world_size,
    )
    control = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)
    return Ranks(rank, world_size, control, PrefixStore("steplabel/failures", store))
