"""bench/labeling_load.py's verdict: latency percentiles, the target, and SQL checks of
what the run stored."""

import argparse
import os
import statistics
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text

from app.core.db import make_engine
from bench.labeling_client import Recorder

TARGET_SUBMISSIONS_PER_S = 300.0
TARGET_P99_MS = 150.0
KEPT_UP = 0.99
"""Paced (``--rate``), the share of the offered submissions/s the server must have served."""


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
