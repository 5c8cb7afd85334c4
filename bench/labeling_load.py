"""Many labelers at once, over real HTTP: take the next task, submit its label, repeat.

    .venv/bin/python -m bench.labeling_load --labelers 64 --duration 30 --workers 2

By default it builds everything itself: a fresh Postgres database (dropped at the end),
the schema, N approved labelers and enough open solutions, then a uvicorn server with
``--workers W``. ``--url`` runs against a server that is already up instead; its labelers
must exist (``--user-prefix``, ``--password``) and ``--database-url`` enables the checks.

Each simulated labeler logs in through the form, then loops: ``GET /label/next`` as htmx
asks for it (the task fragment), then ``POST /api/tasks/{id}/label`` with one rating per
step, or a negative rating at a random step (``found_error``); a phase-1 task, should a
running server hand one out, gets every candidate rated and one chosen. The solutions this
script makes are phase-2 tasks, the default. The loop is closed (each
labeler waits for its answers) unless ``--rate`` paces them to an offered load. Nothing
from the warmup counts. Latency is measured by the load generator, which shares the
machine's cores with the server and Postgres: the CPU line shows who used them.

At the end SQL checks that no solution got more labels than its overlap and that the
database holds exactly one label per successful submission.
"""

import argparse
import asyncio
import gc
import json
import os
import random
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvloop
from sqlalchemy import Engine, NullPool, create_engine, insert, text

from app import schema
from app.content_keys import content_key
from app.datasets.importing import import_prm800k
from app.datasets.reading import read_files
from app.db import make_engine, transaction
from app.models import Problem, QueueState, Role, Solution, User, utc_now
from app.users import hash_password
from bench.databases import fresh_postgres_database
from bench.http_client import HttpConnection, HttpError
from bench.synthetic_prm800k import synthetic_lines

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
# Fixed, so that a rerun against the same server keeps its sessions valid.
SECRET_KEY = "steplabel-labeling-load-benchmark-secret-key"
TARGET_SUBMISSIONS_PER_S = 300.0
TARGET_P99_MS = 150.0
KEPT_UP = 0.99
"""Paced (``--rate``), the share of the offered submissions/s the server must have served."""
SOLUTIONS_PER_SECOND_OF_RUN = 1_500
"""Open solutions made per second of run (and per unit of overlap): more than 2 cores label."""
INSERT_BATCH = 5_000
LOGINS_AT_ONCE = 8
"""Logins verify an argon2 hash (slow on purpose): a few at a time, before the clock starts."""
RETRY_PAUSE_S = 0.05
SESSION_COOKIE = "steplabel_session"
NEXT_HEADERS = {"HX-Request": "true"}

CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')
CSRF_INPUT = re.compile(r'name="csrf_token" value="([^"]+)"')
TASK_ID = re.compile(r'data-task-id="(\d+)"')
PHASE1 = 'data-style="phase1"'
STEP_ITEM = 'class="step"'
ALTERNATIVE_ITEM = 'class="alternative"'
CANDIDATE_ITEM = 'class="candidate"'


# The simulated labelers


@dataclass(frozen=True)
class Task:
    assignment_id: int
    alternatives: list[int]
    """Per step, how many alternative completions it shows besides the step itself."""
    phase1: bool = False
    """Every candidate of every step is rated, and the labeler continues with one."""


def parse_task(fragment: str) -> Task | None:
    """The task in a ``/label/next`` fragment; None when the queue has nothing left."""
    match = TASK_ID.search(fragment)
    if match is None:
        return None
    steps = fragment.split(STEP_ITEM)[1:]
    if PHASE1 in fragment:
        candidates = [step.count(CANDIDATE_ITEM) for step in steps]
        return Task(int(match.group(1)), [count - 1 for count in candidates], phase1=True)
    return Task(int(match.group(1)), [step.count(ALTERNATIVE_ITEM) for step in steps])


def csrf_from(html: str) -> str:
    match = CSRF_META.search(html) or CSRF_INPUT.search(html)
    if match is None:
        raise RuntimeError("the page carries no CSRF token")
    return match.group(1)


def label_body(task: Task, rng: random.Random, found_error_share: float) -> dict[str, Any]:
    """A submission that follows the labeling rules: every step rated, or up to an error."""
    if task.phase1:
        steps = [phase1_step(count, rng) for count in task.alternatives]
        finish_reason = "solution"
    else:
        steps, finish_reason = phase2_steps(task.alternatives, rng, found_error_share)
    return {
        "steps": steps,
        "finish_reason": finish_reason,
        "total_time": rng.randrange(20_000, 240_000),
        "note": "",
    }


def phase2_steps(
    alternatives: list[int], rng: random.Random, found_error_share: float
) -> tuple[list[dict[str, Any]], str]:
    """Steps rated in order up to the end, or up to a negative one (found_error)."""
    error_at = rng.randrange(len(alternatives)) if rng.random() < found_error_share else None
    steps = []
    for index in range(len(alternatives) if error_at is None else error_at + 1):
        negative = index == error_at
        steps.append(
            {
                "rating": -1 if negative else rng.choice((1, 1, 1, 0)),
                "flagged": rng.random() < 0.05,
                "alternative_ratings": (
                    [rng.choice((-1, 0, 1)) for _ in range(alternatives[index])] if negative else []
                ),
            }
        )
    return steps, ("solution" if error_at is None else "found_error")


def phase1_step(alternatives: int, rng: random.Random) -> dict[str, Any]:
    """Every candidate rated; the labeler continues with the best one (never a wrong one)."""
    ratings = [rng.choice((1, 1, 0, -1)) for _ in range(1 + alternatives)]
    if max(ratings) == -1:
        ratings[0] = 0
    return {
        "rating": ratings[0],
        "flagged": rng.random() < 0.05,
        "alternative_ratings": ratings[1:],
        "chosen": ratings.index(max(ratings)),
    }


@dataclass
class Recorder:
    """What the labelers saw; latencies only for requests started in the measured window."""

    measure_from: float
    measure_until: float
    next_ms: list[float] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    created: int = 0
    """Submissions answered ``created: true``, over the whole run: one label each."""
    repeated: int = 0
    """Submissions answered ``created: false`` (the task had been stored already)."""
    measured_submissions: int = 0
    stale_tasks: int = 0
    """``/label/next`` gave back the task this labeler had just submitted successfully."""
    empty_queue: int = 0

    def timed(self, started: float, finished: float, samples: list[float]) -> None:
        if self.measure_from <= started < self.measure_until:
            samples.append((finished - started) * 1000)

    def submitted(self, finished: float, created: bool) -> None:
        if not created:
            self.repeated += 1
            return
        self.created += 1
        if self.measure_from <= finished <= self.measure_until:
            self.measured_submissions += 1


@dataclass(frozen=True)
class Session:
    """A logged-in labeler: the session cookie and the CSRF token that goes with it."""

    cookie: str
    csrf: str


async def log_in(client: httpx.AsyncClient, name: str, password: str) -> Session:
    """Log in through the form as a browser does (untimed, so httpx is fine here)."""
    login_page = await client.get("/login")
    login_page.raise_for_status()
    form = {
        "name": name,
        "password": password,
        "csrf_token": csrf_from(login_page.text),
        "next": "/label/next",
    }
    response = await client.post("/login", data=form)
    if response.status_code != 303:
        raise RuntimeError(f"login as {name} answered {response.status_code}")
    # Logging in starts a new session with a new token: the page it leads to carries it.
    home = await client.get(response.headers["location"])
    home.raise_for_status()
    cookie = client.cookies.get(SESSION_COOKIE)
    if cookie is None:
        raise RuntimeError(f"login as {name} set no {SESSION_COOKIE} cookie")
    return Session(f"{SESSION_COOKIE}={cookie}", csrf_from(home.text))


async def labeler_loop(
    connection: HttpConnection,
    csrf: str,
    recorder: Recorder,
    rng: random.Random,
    *,
    stop_at: float,
    interval: float | None,
    found_error_share: float,
) -> None:
    """Take and submit tasks until ``stop_at``; ``interval`` paces the loop, if given."""
    loop = asyncio.get_running_loop()
    next_start = loop.time() + (rng.uniform(0, interval) if interval else 0)
    last_submitted: int | None = None
    while True:
        if interval is not None:
            await asyncio.sleep(max(0.0, next_start - loop.time()))
            next_start = max(next_start + interval, loop.time())
        if loop.time() >= stop_at:
            return
        started = time.perf_counter()
        try:
            answer = await connection.request("GET", "/label/next", NEXT_HEADERS)
        except (HttpError, TimeoutError) as error:
            recorder.errors[f"next {type(error).__name__}"] += 1
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        recorder.timed(started, time.perf_counter(), recorder.next_ms)
        if answer.status != 200:
            recorder.errors[f"next {answer.status}"] += 1
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        task = parse_task(answer.text())
        if task is None:
            recorder.empty_queue += 1
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        if task.assignment_id == last_submitted:
            recorder.stale_tasks += 1
            continue
        body = json.dumps(label_body(task, rng, found_error_share)).encode()
        headers = {"X-CSRF-Token": csrf, "Content-Type": "application/json"}
        started = time.perf_counter()
        try:
            answer = await connection.request(
                "POST", f"/api/tasks/{task.assignment_id}/label", headers, body
            )
        except (HttpError, TimeoutError) as error:
            recorder.errors[f"submit {type(error).__name__}"] += 1
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        finished = time.perf_counter()
        recorder.timed(started, finished, recorder.submit_ms)
        if answer.status != 200:
            recorder.errors[f"submit {answer.status}"] += 1
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        recorder.submitted(finished, bool(json.loads(answer.body)["created"]))
        last_submitted = task.assignment_id


@dataclass
class Window:
    """What runs beside the labelers in the measured window: CPU and database accounting,
    py-spy."""

    server_pid: int | None
    database_url: str | None
    profile: Path | None
    cpu: list["CpuSnapshot"] = field(default_factory=list)
    database: list["DatabaseActivity | None"] = field(default_factory=list)

    async def watch(self, warmup: float, duration: float) -> None:
        await asyncio.sleep(warmup)
        pids = worker_pids(self.server_pid) if self.server_pid else []
        profilers = start_profilers(pids, self.profile, duration)
        with database_watch(self.database_url) as activity:
            self.cpu.append(cpu_snapshot(self.server_pid))
            self.database.append(activity())
            await asyncio.sleep(duration)
            self.cpu.append(cpu_snapshot(self.server_pid))
            self.database.append(activity())
        for profiler in profilers:
            await asyncio.to_thread(profiler.wait)


async def run_labelers(
    args: argparse.Namespace, url: str, names: list[str], window: Window
) -> Recorder:
    """Log every labeler in, then run them all for the warmup and the measured window."""
    gate = asyncio.Semaphore(LOGINS_AT_ONCE)

    async def gated_log_in(name: str) -> Session:
        async with gate, httpx.AsyncClient(base_url=url, timeout=60.0) as client:
            return await log_in(client, name, args.password)

    sessions = await asyncio.gather(*(gated_log_in(name) for name in names))
    print(f"{len(names)} labelers logged in", flush=True)
    connections = [HttpConnection(url, session.cookie) for session in sessions]
    try:
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        recorder = Recorder(start + args.warmup, start + args.warmup + args.duration)
        stop_at = loop.time() + args.warmup + args.duration
        interval = len(names) / args.rate if args.rate else None
        await asyncio.gather(
            window.watch(args.warmup, args.duration),
            *(
                labeler_loop(
                    connection,
                    session.csrf,
                    recorder,
                    random.Random(f"{args.seed}-{index}"),
                    stop_at=stop_at,
                    interval=interval,
                    found_error_share=args.found_error_share,
                )
                for index, (connection, session) in enumerate(
                    zip(connections, sessions, strict=True)
                )
            ),
        )
        return recorder
    finally:
        await asyncio.gather(*(connection.close() for connection in connections))


def measure(
    args: argparse.Namespace,
    url: str,
    names: list[str],
    server_pid: int | None,
    database_url: str | None,
) -> tuple[Recorder, str, str]:
    """Run the labelers; returns what they saw and the CPU use in the measured window."""
    window = Window(server_pid, database_url, args.profile)
    # uvloop (a uvicorn[standard] dependency) leaves more of the shared cores to the server.
    with no_pauses_of_our_own(), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        recorder = runner.run(run_labelers(args, url, names, window))
    cpu_before, cpu_after = window.cpu
    database_before, database_after = window.database
    return (
        recorder,
        describe_cpu(cpu_before, cpu_after, recorder.measured_submissions),
        describe_activity(database_before, database_after, args.duration),
    )


@contextmanager
def no_pauses_of_our_own() -> Iterator[None]:
    """No garbage collection in this process while it times the server.

    A full pass over this process's objects (the app's and the setup's, over 100,000) took
    about 90 ms here, and every request in flight then looked that much slower: several
    passes a run put the load generator's own pauses into the server's p99. What the setup
    made is frozen first, and the collector is off until the labelers stop (the run's
    garbage is little and mostly acyclic; it is collected afterwards)."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


# Database and server


def labeler_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index:03d}" for index in range(count)]


def import_history(engine: Engine, labels: int, seed: int) -> None:
    """Labels from earlier in the project, imported as PRM800K lines.

    A project under load has labels already, and Postgres plans for the tables it has: on
    empty label tables it would plan the foreign-key checks of the first inserts as scans,
    and keep those plans while the tables grow (until autovacuum analyzes them, up to a
    minute into the run). Labels made in the app come with their finished assignments,
    imported ones without: those are added too, or the queue's queries would be planned
    for an empty assignments table.
    """
    if not labels:
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "history.jsonl"
        with path.open("w") as out:
            for line in synthetic_lines(labels, seed):
                out.write(line + "\n")
        with transaction(engine) as session:
            import_prm800k(session, read_files([path]))
    with engine.begin() as connection:
        connection.execute(HISTORY_ASSIGNMENTS)


HISTORY_ASSIGNMENTS = text(
    """
    INSERT INTO assignments
        (solution_id, labeler_id, slot, leased_at, expires_at, completed_at, label_id)
    SELECT solution_id, labeler_id,
           row_number() OVER (PARTITION BY solution_id ORDER BY id) - 1,
           timestamp, timestamp, timestamp, id
    FROM labels WHERE solution_id IS NOT NULL
    ON CONFLICT DO NOTHING
    """
)


def create_labelers(engine: Engine, names: list[str], password: str) -> None:
    """Approved labelers, inserted directly: one argon2 hash serves them all."""
    password_hash = hash_password(password)
    rows = [
        {
            "name": name,
            "role": Role.LABELER.value,
            "password_hash": password_hash,
            "is_approved": True,
        }
        for name in names
    ]
    with engine.begin() as connection:
        connection.execute(insert(User), rows)


def step_texts(rng: random.Random, number: int) -> list[str]:
    values = [rng.randrange(2, 500) for _ in range(rng.randint(5, 10))]
    return [
        f"Step {index + 1}: since $a_{{{index}}} = {value}$, we get "
        f"$a_{{{index}}}^2 + {number} = {value * value + number}$."
        for index, value in enumerate(values)
    ]


def create_queue(engine: Engine, solutions: int, rng: random.Random) -> None:
    """``solutions`` open solutions of generation 0, four per problem, 5-10 steps each."""
    run = secrets.token_hex(4)
    for first in range(0, solutions, INSERT_BATCH):
        numbers = range(first, min(first + INSERT_BATCH, solutions))
        problem_numbers = sorted({number // 4 for number in numbers})
        problems = [
            {
                "content_key": content_key("load-problem", run, number),
                "text_key": content_key("load-problem-text", run, number),
                "text": f"Problem {number}: find $x$ such that $x^2 = {number * number}$.",
                "ground_truth_answer": str(number),
            }
            for number in problem_numbers
        ]
        with engine.begin() as connection:
            ids = connection.execute(
                insert(Problem).returning(Problem.id, sort_by_parameter_order=True),
                problems,
            ).scalars()
            problem_ids = dict(zip(problem_numbers, ids, strict=True))
            rows = []
            for number in numbers:
                steps = step_texts(rng, number)
                rows.append(
                    {
                        "content_key": content_key("load-solution", run, number),
                        "problem_id": problem_ids[number // 4],
                        "steps": steps,
                        "answer": str(number),
                        "generation": 0,
                        "queue_state": QueueState.OPEN.value,
                    }
                )
            connection.execute(insert(Solution), rows)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def running_server(database_url: str, workers: int, overlap: int) -> Iterator[tuple[str, int]]:
    """uvicorn serving the app on a free loopback port; yields its URL and process id."""
    port = free_port()
    env = os.environ | {
        "STEPLABEL_DATABASE_URL": database_url,
        "STEPLABEL_SECRET_KEY": SECRET_KEY,
        "STEPLABEL_QC_RATE": "0",
        "STEPLABEL_OVERLAP": str(overlap),
    }
    command = [
        sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1",
        "--port", str(port), "--workers", str(workers), "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, server)
        yield url, server.pid
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def wait_healthy(url: str, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with status {server.returncode}")
        with suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url}/healthz did not answer within {timeout:.0f} s")


def worker_pids(server_pid: int) -> list[int]:
    """The uvicorn processes that serve requests: its workers, or itself with one worker."""
    children = descendants(server_pid)
    workers = [pid for pid in children if "spawn_main" in _cmdline(pid)]
    return workers or [server_pid]


def descendants(pid: int) -> list[int]:
    found = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with suppress(OSError):
                children = [int(child) for child in (task / "children").read_text().split()]
                found += children
                pending += children
    return found


def _cmdline(pid: int) -> str:
    with suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    return ""


# Who used the CPU


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


# Checks


@dataclass(frozen=True)
class Checks:
    labels: int
    over_overlap: int
    miscounted: int
    """Solutions whose ``completed_count`` differs from their regular labels."""
    open_left: int
    """Open solutions at the end: a "no task" answer with some left was a lost race."""


def check_database(
    database_url: str, names: list[str], since: datetime, default_overlap: int
) -> Checks:
    """The invariants, over the labels these labelers made since ``since``."""
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            overlap = connection.scalar(
                text("SELECT value FROM project_settings WHERE key = 'overlap'")
            )
            params = {
                "names": names,
                "since": since,
                "overlap": default_overlap if overlap is None else int(overlap),
            }
            ours = (
                "SELECT l.* FROM labels l JOIN users u ON u.id = l.labeler_id "
                "WHERE u.name = ANY(:names) AND l.timestamp >= :since"
            )
            labels = connection.scalar(text(f"SELECT count(*) FROM ({ours}) ours"), params)
            touched = (
                "SELECT s.id, s.overlap, s.completed_count, ("
                "  SELECT count(*) FROM labels l WHERE l.solution_id = s.id"
                "  AND NOT l.is_quality_control AND NOT l.is_initial_screening"
                ") AS labels FROM solutions s "
                f"WHERE s.id IN (SELECT solution_id FROM ({ours}) ours)"
            )
            over = connection.scalar(
                text(
                    f"SELECT count(*) FROM ({touched}) t "
                    "WHERE t.labels > coalesce(t.overlap, :overlap)"
                ),
                params,
            )
            miscounted = connection.scalar(
                text(f"SELECT count(*) FROM ({touched}) t WHERE t.labels <> t.completed_count"),
                params,
            )
            open_left = connection.scalar(
                text("SELECT count(*) FROM solutions WHERE queue_state = 'open'")
            )
        return Checks(int(labels or 0), int(over or 0), int(miscounted or 0), int(open_left or 0))
    finally:
        engine.dispose()


def postgres_version(database_url: str) -> str:
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            return str(connection.scalar(text("SHOW server_version")))
    finally:
        engine.dispose()


# Report


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def latency_row(name: str, samples: list[float]) -> str:
    if not samples:
        return f"| {name:<9} | {0:>7} |" + " - |" * 5
    figures = [statistics.fmean(samples)] + [
        percentile(samples, share) for share in (0.50, 0.95, 0.99, 1.0)
    ]
    cells = " | ".join(f"{value:>6.1f}" for value in figures)
    return f"| {name:<9} | {len(samples):>7,} | {cells} |"


def report(
    args: argparse.Namespace, recorder: Recorder, cpu: str, database: str, checks: Checks | None
) -> bool:
    """Print the figures; True when the target is met and every check passed."""
    rate = recorder.measured_submissions / args.duration
    print()
    print(f"submissions/s   {rate:,.1f}  ({recorder.measured_submissions:,} in {args.duration} s)")
    print()
    print("| request   |   count |   mean |    p50 |    p95 |    p99 |    max |")
    print("|-----------|--------:|-------:|-------:|-------:|-------:|-------:|")
    print(latency_row("next task", recorder.next_ms))
    print(latency_row("submit", recorder.submit_ms))
    print("(milliseconds, requests started in the measured window)")
    print()
    errors = ", ".join(f"{key}: {count}" for key, count in sorted(recorder.errors.items()))
    print(f"errors (whole run)      {errors or 'none'}")
    print(f"stale next task         {recorder.stale_tasks} (the task just submitted came back)")
    print(f"repeated submissions    {recorder.repeated} (answered created: false)")
    print(f'no task given           {recorder.empty_queue} ("Nothing to label right now")')
    print(f"cpu, cores used         {cpu}")
    print(f"postgres, per second    {database}")
    print(f"os.cpu_count()          {os.cpu_count()} (load generator, server, Postgres share them)")
    print()
    p99 = max(
        (
            percentile(samples, 0.99)
            for samples in (recorder.next_ms, recorder.submit_ms)
            if samples
        ),
        default=float("inf"),
    )
    if args.rate:
        # Paced, the labelers never go faster than the offered rate: what counts is that the
        # server kept up with it (a run ends a fraction of a task short of it).
        fast_enough = args.rate >= TARGET_SUBMISSIONS_PER_S and rate >= KEPT_UP * args.rate
        reading = f"offered {args.rate:g}/s, kept up at {rate:.1f}/s"
    else:
        fast_enough = rate >= TARGET_SUBMISSIONS_PER_S
        reading = "closed loop"
    met = fast_enough and p99 < TARGET_P99_MS
    print(
        f"target: >= {TARGET_SUBMISSIONS_PER_S:.0f} submissions/s with p99 < {TARGET_P99_MS:.0f} ms"
        f" ({reading}; worst p99 {p99:.1f} ms): {'met' if met else 'MISSED'}"
    )
    if checks is None:
        print("checks: skipped (give --database-url to check a running server)")
        return met
    rows = (
        ("solutions over their overlap", f"{checks.over_overlap}", checks.over_overlap == 0),
        (
            "labels == successful submissions",
            f"{checks.labels:,} == {recorder.created:,}",
            checks.labels == recorder.created,
        ),
        ("completed_count != labels", f"{checks.miscounted}", checks.miscounted == 0),
    )
    print(f"open solutions left     {checks.open_left:,}")
    for name, value, ok in rows:
        print(f"check: {name:<34} {value:>20}  {'OK' if ok else 'FAILED'}")
    return met and all(ok for _, _, ok in rows)


# Command line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Label under load over HTTP, and time it.")
    parser.add_argument("--labelers", type=int, default=64, help="simulated labelers")
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds not counted")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="offered submissions/s over all labelers (default 0: closed loop, no pause)",
    )
    parser.add_argument(
        "--found-error-share", type=float, default=0.25, help="share of found_error labels"
    )
    parser.add_argument("--overlap", type=int, default=1, help="labelers per solution")
    parser.add_argument(
        "--history", type=int, default=10_000, help="labels stored before the run starts"
    )
    parser.add_argument("--solutions", type=int, help="open solutions to make (default: plenty)")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL, help="server to use")
    parser.add_argument("--keep-database", action="store_true", help="do not drop it")
    parser.add_argument("--url", help="use this running server instead of starting one")
    parser.add_argument("--database-url", help="with --url: its database, for the checks")
    parser.add_argument("--user-prefix", default="load-labeler-", help="labeler names' start")
    parser.add_argument("--password", help="the labelers' password (default: random)")
    parser.add_argument("--profile", type=Path, help="py-spy each worker into this folder")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)
    if args.url and not args.password:
        parser.error("--url needs --password (and labelers named --user-prefix000, ...)")
    if args.url and args.profile:
        parser.error("--profile needs the server this script starts")
    args.password = args.password or secrets.token_urlsafe(12)
    return args


def describe_machine(database_url: str | None) -> None:
    postgres = postgres_version(database_url) if database_url else "unknown"
    print(
        f"machine: os.cpu_count()={os.cpu_count()}, Python {sys.version.split()[0]}, "
        f"PostgreSQL {postgres}, load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = labeler_names(args.user_prefix, args.labelers)
    mode = f"paced to {args.rate:g} submissions/s" if args.rate else "closed loop"
    print(
        f"{args.labelers} labelers, {mode}, {args.warmup:g} s warmup + {args.duration:g} s, "
        f"{args.found_error_share:.0%} found_error",
        flush=True,
    )
    since = utc_now() - timedelta(seconds=1)
    if args.url:
        describe_machine(args.database_url)
        recorder, cpu, database = measure(args, args.url, names, None, args.database_url)
        time.sleep(1.0)  # let the last requests' transactions commit
        checks = (
            check_database(args.database_url, names, since, args.overlap)
            if args.database_url
            else None
        )
        return 0 if report(args, recorder, cpu, database, checks) else 1
    solutions = args.solutions or round(
        SOLUTIONS_PER_SECOND_OF_RUN * (args.warmup + args.duration) * args.overlap
    )
    with fresh_postgres_database(
        args.postgres_url, "steplabel_load", args.keep_database
    ) as database_url:
        describe_machine(database_url)
        started = time.perf_counter()
        schema.upgrade(database_url)
        engine = make_engine(database_url)
        try:
            import_history(engine, args.history, args.seed)
            create_labelers(engine, names, args.password)
            create_queue(engine, solutions, random.Random(args.seed))
            with engine.connect() as connection:
                connection.execute(text("ANALYZE"))
        finally:
            engine.dispose()
        print(
            f"set up {args.history:,} earlier labels, {args.labelers} labelers and "
            f"{solutions:,} open solutions (overlap {args.overlap}) "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        with running_server(database_url, args.workers, args.overlap) as (url, server_pid):
            pids = ", ".join(str(pid) for pid in worker_pids(server_pid))
            print(f"uvicorn at {url}, {args.workers} worker(s): pid {pids}", flush=True)
            recorder, cpu, database = measure(args, url, names, server_pid, database_url)
        # The server has stopped: every transaction it started is over.
        checks = check_database(database_url, names, since, args.overlap)
        return 0 if report(args, recorder, cpu, database, checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
