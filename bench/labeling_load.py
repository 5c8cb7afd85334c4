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

This module is the command line; the parts are bench/labeling_setup.py (the database and
the server), bench/labeling_client.py (the simulated labelers), bench/labeling_usage.py
(who used the CPU) and bench/labeling_report.py (latencies, the target, the checks).
"""

import argparse
import os
import random
import secrets
import sys
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text

from app.core import schema
from app.core.db import make_engine
from app.models import utc_now
from bench.databases import fresh_postgres_database
from bench.labeling_client import measure
from bench.labeling_report import check_database, postgres_version, report
from bench.labeling_setup import (
    create_labelers,
    create_queue,
    import_history,
    labeler_names,
    running_server,
    worker_pids,
)

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SOLUTIONS_PER_SECOND_OF_RUN = 1_500
"""Open solutions made per second of run (and per unit of overlap): more than 2 cores label."""


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
