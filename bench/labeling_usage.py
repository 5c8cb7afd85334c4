"""Who used the machine in bench/labeling_load.py's measured window: CPU per process
group, Postgres's commits and connections, and py-spy on the workers."""

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import NullPool, create_engine, text

from bench.labeling_setup import descendants


@dataclass(frozen=True)
class CpuSnapshot:
    at: float
    busy_ticks: int
    total_ticks: int
    by_group: dict[str, dict[int, int]]
    """CPU ticks so far of each process, by group."""


def process_ticks(pid: int) -> int:
    with suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    return 0


def postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
    return pids


def cpu_snapshot(server_pid: int | None) -> CpuSnapshot:
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    total = sum(fields[:8])  # guest time is already counted in user
    groups = {"load generator": [os.getpid()]}
    if server_pid is not None:
        groups["server"] = [server_pid, *descendants(server_pid)]
    groups["postgres"] = postgres_pids()
    by_group = {name: {pid: process_ticks(pid) for pid in pids} for name, pids in groups.items()}
    return CpuSnapshot(time.perf_counter(), total - idle, total, by_group)


def describe_cpu(before: CpuSnapshot, after: CpuSnapshot, submissions: int) -> str:
    """CPU used in the window, in cores (1.00 = one core busy the whole time), and the
    server's CPU time per submission, which other work on the machine hardly changes."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    seconds = after.at - before.at

    def cores(ticks: int) -> float:
        return ticks / ticks_per_s / seconds

    parts = []
    accounted = 0
    for group, processes in after.by_group.items():
        # A process that ended in the window (a dropped pool connection's backend) took
        # its ticks with it: they show as "other".
        earlier = before.by_group.get(group, {})
        used = sum(ticks - earlier.get(pid, 0) for pid, ticks in processes.items())
        accounted += used
        parts.append(f"{group} {cores(used):.2f}")
    busy = after.busy_ticks - before.busy_ticks
    idle = (after.total_ticks - before.total_ticks) - busy
    parts.append(f"other {cores(max(0, busy - accounted)):.2f}")
    parts.append(f"idle {cores(idle):.2f}")
    server = after.by_group.get("server")
    if server is not None and submissions:
        earlier = before.by_group["server"]
        used = sum(ticks - earlier.get(pid, 0) for pid, ticks in server.items())
        per_submission = used / ticks_per_s / submissions * 1000
        parts.append(f"server {per_submission:.1f} ms per submission (next task included)")
    return ", ".join(parts)


def start_profilers(
    pids: list[int], directory: Path | None, seconds: float
) -> list["subprocess.Popen[bytes]"]:
    """py-spy on each worker for ``seconds`` when given a directory: collapsed stacks of the
    thread that holds the GIL, which is where the worker's Python CPU time goes."""
    if directory is None:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    py_spy = Path(sys.executable).parent / "py-spy"
    return [
        subprocess.Popen(
            [
                str(py_spy), "record", "--pid", str(pid), "--duration", str(round(seconds)),
                "--rate", "100", "--format", "raw", "--nonblocking", "--gil",
                "--output", str(directory / f"worker-{pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
        )
        for pid in pids
    ]  # fmt: skip


@dataclass(frozen=True)
class DatabaseActivity:
    sessions: int
    """Connections opened to the database so far."""
    commits: int
    rollbacks: int


@contextmanager
def database_watch(database_url: str | None) -> Iterator[Callable[[], DatabaseActivity | None]]:
    """A function that reads the database's counters (None without a database URL)."""
    if database_url is None:
        yield lambda: None
        return
    engine = create_engine(database_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    query = text(
        "SELECT sessions, xact_commit, xact_rollback FROM pg_stat_database "
        "WHERE datname = current_database()"
    )
    with engine.connect() as connection:

        def activity() -> DatabaseActivity:
            # Backends report their counters when idle, at most once a second.
            return DatabaseActivity(*connection.execute(query).one())

        yield activity
    engine.dispose()


def describe_activity(
    before: DatabaseActivity | None, after: DatabaseActivity | None, seconds: float
) -> str:
    if before is None or after is None:
        return "unknown (no database URL)"
    return (
        f"{(after.sessions - before.sessions) / seconds:,.1f} connections opened, "
        f"{(after.commits - before.commits) / seconds:,.0f} commits, "
        f"{(after.rollbacks - before.rollbacks) / seconds:,.1f} rollbacks"
    )
