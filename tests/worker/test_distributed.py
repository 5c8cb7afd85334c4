"""Ranks: rank 0's results and failures reach the others, shares come back in order, and
a failure reported by another rank is recorded while rank 0 is stuck in a collective."""

import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn

from worker import distributed
from worker.distributed import SINGLE, Ranks


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _outcome(work: Callable[[], Any]) -> Any:
    """What a call gave this rank, or the error it raised, as JSON."""
    try:
        return work()
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error)}


def _watch_while_blocked(ranks: Ranks, directory: Path) -> None:
    """Rank 1 reports a failure while rank 0 waits in a barrier that rank 1 has not joined."""
    recorded = directory / "recorded.txt"
    if ranks.is_main:
        with ranks.failures_watched("run-7", recorded.write_text):
            dist.barrier()
    else:
        ranks.report_failure("run-7", "out of memory")
        deadline = time.monotonic() + 30
        while not recorded.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        dist.barrier()  # lets rank 0 go on, recorded or not


def _rank(rank: int, port: int, directory: Path, device_type: str) -> None:
    """One torchrun-like process: the environment torchrun sets, then each behaviour."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
    )
    device = torch.device(device_type, rank) if device_type == "cuda" else torch.device("cpu")
    ranks = distributed.start(device)
    summed = torch.ones(1, device=device)  # training's collectives: NCCL on CUDA
    dist.all_reduce(summed)
    calls: list[int] = []

    def work() -> str:
        calls.append(ranks.rank)
        return f"from rank {ranks.rank}"

    def fail() -> None:
        raise ValueError("no such table")

    try:
        report = {
            "rank": ranks.rank,
            "world_size": ranks.world_size,
            "backend": dist.get_backend(),
            "summed": summed.item(),
            "value": ranks.on_main(work),
            "nested": ranks.on_main(lambda: ranks.on_main(lambda: 2) + 1),
            "failure": _outcome(lambda: ranks.on_main(fail)),
            "after_failure": ranks.on_main(lambda: "in step"),
            "sharded": ranks.map_sharded(list(range(7)), lambda s: [[x, ranks.rank] for x in s]),
            "calls": calls,
        }
        _watch_while_blocked(ranks, directory)
        report["reported"] = ranks.with_reported_failures("run-7", "rank 0's own error")
        (directory / f"rank-{rank}.json").write_text(json.dumps(report))
    finally:
        ranks.close()


def _spawn_ranks(directory: Path, device_type: str) -> list[dict[str, Any]]:
    spawn(_rank, args=(_free_port(), directory, device_type), nprocs=2)  # type: ignore[no-untyped-call]
    return [json.loads((directory / f"rank-{r}.json").read_text()) for r in range(2)]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    directory = tmp_path_factory.mktemp("ranks")
    return _spawn_ranks(directory, "cpu"), directory


def test_two_ranks_join_over_gloo_on_the_cpu(reports: tuple[list[dict[str, Any]], Path]) -> None:
    ranks, _ = reports
    assert [(r["rank"], r["world_size"], r["backend"], r["summed"]) for r in ranks] == [
        (0, 2, "gloo", 2.0),
        (1, 2, "gloo", 2.0),
    ]


@pytest.mark.gpu
def test_two_gpus_train_over_nccl_and_talk_over_gloo(tmp_path: Path) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")

    ranks = _spawn_ranks(tmp_path, "cuda")

    assert [(r["backend"], r["summed"]) for r in ranks] == [("nccl", 2.0), ("nccl", 2.0)]
    assert [r["value"] for r in ranks] == ["from rank 0", "from rank 0"]
    assert ranks[0]["sharded"] == [[x, x % 2] for x in range(7)]
    assert (tmp_path / "recorded.txt").read_text() == "rank 1: out of memory"


def test_rank_zero_works_and_every_rank_gets_its_result(
    reports: tuple[list[dict[str, Any]], Path],
) -> None:
    ranks, _ = reports
    assert [r["value"] for r in ranks] == ["from rank 0", "from rank 0"]
    assert [r["calls"] for r in ranks] == [[0], []]
    # Work on rank 0 may itself use on_main: it runs in place, nothing is sent twice.
    assert [r["nested"] for r in ranks] == [3, 3]


def test_a_failure_on_rank_zero_fails_every_rank_and_they_stay_in_step(
    reports: tuple[list[dict[str, Any]], Path],
) -> None:
    ranks, _ = reports
    assert ranks[0]["failure"] == {"error": "ValueError", "message": "no such table"}
    assert ranks[1]["failure"] == {
        "error": "RankFailed",
        "message": "rank 0 failed: ValueError: no such table",
    }
    assert [r["after_failure"] for r in ranks] == ["in step", "in step"]


def test_sharded_work_comes_back_to_rank_zero_in_order(
    reports: tuple[list[dict[str, Any]], Path],
) -> None:
    ranks, _ = reports
    assert ranks[0]["sharded"] == [[x, x % 2] for x in range(7)]
    assert ranks[1]["sharded"] == []


def test_rank_zero_records_a_reported_failure_while_blocked(
    reports: tuple[list[dict[str, Any]], Path],
) -> None:
    ranks, directory = reports
    assert (directory / "recorded.txt").read_text() == "rank 1: out of memory"
    assert ranks[0]["reported"] == "rank 0: rank 0's own error\nrank 1: out of memory"


def test_one_process_does_the_work_itself() -> None:
    assert SINGLE.world_size == 1 and SINGLE.is_main
    assert SINGLE.on_main(lambda: 5) == 5
    assert SINGLE.map_sharded([1, 2, 3], lambda share: [x * 2 for x in share]) == [2, 4, 6]
    assert SINGLE.with_reported_failures("run-1", "boom") == "boom"
    with pytest.raises(ValueError), SINGLE.failures_watched("run-1", print):
        SINGLE.on_main(lambda: int("x"))


def test_without_torchrun_the_worker_is_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed.start(torch.device("cpu")) is SINGLE
    monkeypatch.setenv("WORLD_SIZE", "1")  # torchrun --nproc-per-node 1
    assert distributed.start(torch.device("cpu")) is SINGLE
    assert not dist.is_initialized()
