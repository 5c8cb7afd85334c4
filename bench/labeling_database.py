"""The labeling requests' database work alone: next task and submit, one labeler at a time.

    .venv/bin/python -m bench.labeling_database --tasks 2000

The load benchmark (bench/labeling_load.py) runs on a machine whose speed drifts by a third
within an hour, so a change worth a tenth is lost in it. This one calls the two labeling
requests' units of work (the functions their routes run in a database thread) in a loop on
a fresh Postgres database, without HTTP or concurrency, and prints per task: wall time, the
CPU this process used, the CPU Postgres used, and how often the process waited for the
database (voluntary context switches: one per round trip, and steady from run to run).
"""

import argparse
import os
import random
import resource
import time
from dataclasses import dataclass

from sqlalchemy import text

from app.auth.sessions import Login
from app.core import schema
from app.core.config import get_settings
from app.core.db import dispose_engines, make_engine
from app.labeling.service import submit, take_next_task
from app.labeling.submission import SubmissionInput
from bench.databases import fresh_postgres_database
from bench.labeling_load import DEFAULT_POSTGRES_URL
from bench.labeling_setup import create_labelers, create_queue, import_history, labeler_names
from bench.labeling_usage import postgres_pids, process_ticks

LABELERS = 4
WARMUP_TASKS = 200
"""Tasks before the clock starts: psycopg prepares a statement on its fifth run."""


@dataclass(frozen=True)
class Usage:
    wall_s: float
    user_s: float
    system_s: float
    waits: int
    postgres_ticks: int


def usage() -> Usage:
    own = resource.getrusage(resource.RUSAGE_SELF)
    postgres = sum(process_ticks(pid) for pid in postgres_pids())
    return Usage(time.perf_counter(), own.ru_utime, own.ru_stime, own.ru_nvcsw, postgres)


def label_tasks(logins: list[Login], tasks: int) -> None:
    """Each labeler in turn takes their next task and rates every step positive."""
    for index in range(tasks):
        login = logins[index % len(logins)]
        _viewer, task = take_next_task(login)
        if task is None:
            raise RuntimeError("the queue ran dry: make more solutions")
        body = SubmissionInput.model_validate(
            {
                "steps": [{"rating": 1} for _ in task.steps],
                "finish_reason": "solution",
                "total_time": 1000,
            }
        )
        submit(login, task.assignment_id, body)


def report(before: Usage, after: Usage, tasks: int) -> None:
    per_task = 1000 / tasks
    ticks_ms = 1000 / os.sysconf("SC_CLK_TCK")
    print(f"tasks                      {tasks:,} (next task + submit, one labeler at a time)")
    print(f"wall, ms per task          {(after.wall_s - before.wall_s) * per_task:.2f}")
    user = (after.user_s - before.user_s) * per_task
    system = (after.system_s - before.system_s) * per_task
    print(f"this process, CPU ms/task  {user + system:.2f} (user {user:.2f}, system {system:.2f})")
    postgres = (after.postgres_ticks - before.postgres_ticks) * ticks_ms / tasks
    print(f"postgres, CPU ms/task      {postgres:.2f}")
    print(f"waits for the database     {(after.waits - before.waits) / tasks:.1f} per task")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="tasks measured")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL, help="server to use")
    args = parser.parse_args(argv)
    with fresh_postgres_database(args.postgres_url, "steplabel_database") as url:
        schema.upgrade(url)
        engine = make_engine(url)
        try:
            import_history(engine, 5_000, seed=0)
            names = labeler_names("database-labeler-", LABELERS)
            create_labelers(engine, names, "not-a-real-password")
            create_queue(engine, WARMUP_TASKS + args.tasks + 100, random.Random(0))
            with engine.connect() as connection:
                connection.execute(text("ANALYZE"))
                logins = [
                    Login(user_id, version, {})
                    for user_id, version in connection.execute(
                        text("SELECT id, session_version FROM users WHERE name LIKE :names"),
                        {"names": "database-labeler-%"},
                    )
                ]
        finally:
            engine.dispose()
        os.environ["STEPLABEL_DATABASE_URL"] = url
        get_settings.cache_clear()  # the app reads the URL from the settings
        try:
            label_tasks(logins, WARMUP_TASKS)
            before = usage()
            label_tasks(logins, args.tasks)
            report(before, usage(), args.tasks)
        finally:
            dispose_engines()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
