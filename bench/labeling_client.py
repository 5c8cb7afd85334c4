"""The simulated labelers of bench/labeling_load.py: each logs in over HTTP, then takes its
next task and submits a label, again and again, while the clock runs."""

import argparse
import asyncio
import gc
import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvloop

from bench.http_client import HttpConnection, HttpError
from bench.labeling_setup import worker_pids
from bench.labeling_usage import (
    CpuSnapshot,
    DatabaseActivity,
    cpu_snapshot,
    database_watch,
    describe_activity,
    describe_cpu,
    start_profilers,
)

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
