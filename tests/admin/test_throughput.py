"""Throughput against a reference computed in the test with plain Python."""

import statistics
from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from app.admin.throughput import WINDOWS, throughput, window_start
from app.auth.users import deactivate
from app.models import Role
from tests.factories import make_label, make_solution, make_user

NOW = datetime(2026, 5, 4, 12, 30, 15)
# (labeler, minutes before NOW, milliseconds spent, steps rated)
LABELS = [
    ("ann", 5, 90_000, 3),
    ("ann", 50, 30_000, 1),
    ("ann", 61, 120_000, 4),
    ("ann", 60 * 23, 45_000, 2),
    ("ann", 60 * 30, 600_000, 5),  # outside the 24-hour window, inside the 7-day one
    ("bob", 1, 10_000, 2),
    ("bob", 125, None, 2),  # no time recorded
    ("bob", 200, 20_000, 0),  # a bad problem: no steps
    ("bob", 60 * 24 * 8, 1_000, 1),  # outside every window but the 30-day one
    ("root", 30, 60_000, 3),  # an admin labels too: not labeling work, left out
]


def build(session: Session) -> dict[str, int]:
    users = {
        "ann": make_user(session, "ann"),
        "bob": make_user(session, "bob"),
        "cid": make_user(session, "cid"),  # active, has labeled nothing
        "dee": make_user(session, "dee"),  # inactive, labeled nothing
        "root": make_user(session, "root", role=Role.ADMIN),
    }
    deactivate(session, "dee")
    solution = make_solution(session)
    for name, minutes, spent, steps in LABELS:
        make_label(
            session,
            users[name],
            solution,
            [[1]] * steps,
            finish_reason="solution" if steps else "bad_problem",
            timestamp=NOW - timedelta(minutes=minutes),
            total_time=spent,
        )
    return {name: user.id for name, user in users.items()}


def reference(window_key: str, names: set[str] | None) -> dict[str, object]:
    """The figures of a window for the labelers ``names`` (None: every labeler), by hand."""
    window = WINDOWS[window_key]
    start = window_start(window, NOW)
    rows = [
        (NOW - timedelta(minutes=minutes), spent, steps)
        for name, minutes, spent, steps in LABELS
        if (name in names if names else name != "root")
        and NOW - timedelta(minutes=minutes) >= start
    ]
    per_hour = [0.0] * window.buckets
    for moment, _, _ in rows:
        per_hour[int((moment - start) / window.bucket)] += 1 / window.bucket_hours
    timed = [(spent, steps) for _, spent, steps in rows if spent is not None]
    hours = sum(spent for spent, _ in timed) / 3_600_000
    return {
        "labels": len(rows),
        "per_hour": per_hour,
        "labels_per_working_hour": len(timed) / hours if hours else None,
        "median_seconds_per_task": statistics.median(s / 1000 for s, _ in timed) if timed else None,
        "median_seconds_per_step": statistics.median(s / n / 1000 for s, n in timed if n)
        if any(n for _, n in timed)
        else None,
        "last_label_at": max((moment for moment, _, _ in rows), default=None),
    }


def assert_matches(row: object, expected: dict[str, object]) -> None:
    for key, value in expected.items():
        exact = value is None or isinstance(value, datetime)
        assert getattr(row, key) == (value if exact else pytest.approx(value)), key


@pytest.mark.parametrize("window_key", list(WINDOWS))
def test_every_labeler_and_the_total_match_the_reference(session: Session, window_key: str) -> None:
    build(session)
    result = throughput(session, WINDOWS[window_key], now=NOW)
    assert_matches(result.overall, reference(window_key, None))
    by_name = {row.name: row for row in result.labelers}
    for name in ("ann", "bob", "cid"):
        assert_matches(by_name[name], reference(window_key, {name}))
    assert "root" not in by_name


def test_the_window_ends_with_the_bucket_of_now(session: Session) -> None:
    build(session)
    result = throughput(session, WINDOWS["24h"], now=NOW)
    assert result.bucket_starts[0] == datetime(2026, 5, 3, 13)
    assert result.bucket_starts[-1] == datetime(2026, 5, 4, 12)
    assert len(result.bucket_starts) == 24
    daily = throughput(session, WINDOWS["30d"], now=NOW)
    assert daily.bucket_starts[-1] == datetime(2026, 5, 4)
    assert len(daily.bucket_starts) == 30


def test_who_is_listed_busiest_first(session: Session) -> None:
    ids = build(session)
    result = throughput(session, WINDOWS["24h"], now=NOW)
    # The inactive labeler without labels is left out, and so is the admin who labeled.
    assert [row.name for row in result.labelers] == ["ann", "bob", "cid"]
    assert [row.labeler_id for row in result.labelers] == [ids[n] for n in ("ann", "bob", "cid")]
    assert result.labelers[-1].per_hour == [0.0] * 24
    assert result.labelers[-1].median_seconds_per_task is None


def test_a_new_label_moves_the_figures(session: Session) -> None:
    build(session)
    before = throughput(session, WINDOWS["24h"], now=NOW).overall
    ann = next(r for r in throughput(session, WINDOWS["24h"], now=NOW).labelers if r.name == "ann")
    make_label(session, make_user(session, "eve"), make_solution(session), [[1]], timestamp=NOW)
    after = throughput(session, WINDOWS["24h"], now=NOW)
    assert after.overall.labels == before.labels + 1
    assert after.overall.per_hour[-1] == before.per_hour[-1] + 1
    assert next(r for r in after.labelers if r.name == "ann") == ann
