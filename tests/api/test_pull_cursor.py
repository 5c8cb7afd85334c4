"""A pull's cursor never skips or repeats a label, also while labels are being written: on
Postgres a label committed after a later one (ids are taken at insert, not at commit) still
comes in the next pull, exactly once."""

import io
import json
import random
import threading
import time

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.consensus.service import PROVENANCE_KEY
from app.datasets import export
from app.datasets.export import ExportFilter, write_consensus_export, write_export
from app.datasets.pull import COUNT_HEADER, PullError, plan_pull
from app.models import Solution, User
from app.pull_options import PullOptions
from tests.conftest import DatabaseFactory
from tests.factories import make_label, make_rated_label, make_solution, make_user

THREE_STEPS = ["One.", "Two.", "Three.\n\n# Answer\n\n3"]


def _setup(engine: Engine) -> tuple[int, int]:
    with Session(engine) as session:
        labeler = make_user(session, "lab")
        solution = make_solution(session)
        session.commit()
        return labeler.id, solution.id


def _write_label(session: Session, labeler_id: int, solution_id: int, mark: int) -> int:
    """A label told apart from the others by its total_time, ``mark``; its id."""
    labeler = session.get_one(User, labeler_id)
    solution = session.get_one(Solution, solution_id)
    return make_label(session, labeler, solution, [[1], [1]], total_time=mark).id


def _pull(engine: Engine, since: str | None) -> tuple[list[int], str]:
    """(the marks of the labels pulled, the next cursor)."""
    with Session(engine) as session:
        pull = plan_pull(session, PullOptions(since=since))
    marks = [json.loads(line)["label"]["total_time"] for line in "".join(pull.lines()).splitlines()]
    assert len(marks) == pull.labels
    return marks, pull.next_cursor


def test_a_label_committed_late_is_not_skipped(
    engine: Engine, database_factory: DatabaseFactory
) -> None:
    if database_factory.backend != "postgres":
        pytest.skip("SQLite has one writer at a time: no label commits out of id order")
    labeler_id, solution_id = _setup(engine)
    _, cursor = _pull(engine, None)
    with engine.connect() as first, engine.connect() as second:
        early = Session(bind=first)
        early_id = _write_label(early, labeler_id, solution_id, 1)  # in flight
        late = Session(bind=second)
        late_id = _write_label(late, labeler_id, solution_id, 2)
        late.commit()
        # What an id cursor would get wrong: the larger id is committed, the smaller not.
        assert late_id > early_id
        marks, cursor = _pull(engine, cursor)
        assert marks == []  # held back until the earlier transaction ends
        early.commit()
    marks, cursor = _pull_until(engine, cursor, 2)
    assert marks == [1, 2]
    assert _pull(engine, cursor)[0] == []


def _pull_until(engine: Engine, cursor: str, wanted: int) -> tuple[list[int], str]:
    """Pull until ``wanted`` labels came: the horizon is the server's, so a transaction that
    another test process holds open (in any database) delays labels, never loses them."""
    marks: list[int] = []
    deadline = time.monotonic() + 60
    while len(marks) < wanted and time.monotonic() < deadline:
        more, cursor = _pull(engine, cursor)
        marks += more
        if len(marks) < wanted:
            time.sleep(0.2)
    return marks, cursor


PULLS_BETWEEN = 10
"""Labels a writer writes before it waits for the next pull: on a loaded machine SQLite's
lock can go to the writers again and again, and the pulls would only come after them."""


def test_pulls_during_writes_get_every_label_exactly_once(engine: Engine) -> None:
    labeler_id, solution_id = _setup(engine)
    writers, per_writer = 3, 40
    failures: list[BaseException] = []
    pulled_once = threading.Condition()
    pulls = 0

    def wait_for_a_pull() -> None:
        with pulled_once:
            seen = pulls
            pulled_once.wait_for(lambda: pulls > seen, timeout=10)

    def write(writer: int) -> None:
        pause = random.Random(writer)
        try:
            for i in range(per_writer):
                if i and i % PULLS_BETWEEN == 0:
                    wait_for_a_pull()
                with Session(engine) as session:
                    _write_label(session, labeler_id, solution_id, writer * 1000 + i)
                    # Transactions overlap: ids are taken in one order and committed in another.
                    time.sleep(pause.uniform(0, 0.01))
                    session.commit()
                # Room for the pulls: SQLite's lock goes to whoever asks again first.
                time.sleep(pause.uniform(0, 0.01))
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    pulled: list[int] = []
    cursor = None
    while any(thread.is_alive() for thread in threads):
        marks, cursor = _pull(engine, cursor)
        pulled += marks
        with pulled_once:
            pulls += 1
            pulled_once.notify_all()
    for thread in threads:
        thread.join()
    # What is left, however long another test process's transaction holds the horizon back.
    marks, cursor = _pull_until(engine, cursor, writers * per_writer - len(pulled))
    pulled += marks
    assert not failures, failures
    expected = [w * 1000 + i for w in range(writers) for i in range(per_writer)]
    assert sorted(pulled) == expected  # every label, none twice
    assert pulls > 3, "the writers finished before the pulls could overlap them"
    assert _pull(engine, cursor)[0] == []


def test_a_cursor_from_elsewhere_is_refused(engine: Engine) -> None:
    other = "id-5" if engine.dialect.name == "postgresql" else "xid-5"
    with Session(engine) as session:
        with pytest.raises(PullError, match="not a cursor"):
            plan_pull(session, PullOptions(since="yesterday"))
        with pytest.raises(PullError, match="made by a server on"):
            plan_pull(session, PullOptions(since=other))


def test_on_sqlite_a_cursor_past_the_newest_label_is_refused(engine: Engine) -> None:
    """As after ``steplabel restore`` put back an older backup: the next labels would take
    the ids this cursor already counted, and a pull from it would skip them."""
    if engine.dialect.name != "sqlite":
        pytest.skip("a Postgres cursor is a transaction id, which a restore does not reuse")
    labeler_id, solution_id = _setup(engine)
    with Session(engine) as session:
        _write_label(session, labeler_id, solution_id, 1)
        session.commit()
    marks, cursor = _pull(engine, None)
    assert marks == [1] and _pull(engine, cursor)[0] == []
    ahead = f"id-{int(cursor.removeprefix('id-')) + 1}"
    refused = pytest.raises(PullError, match=r"past the newest label here \(id-2\).*without")
    with Session(engine) as session, refused:
        plan_pull(session, PullOptions(since=ahead))


def test_a_consensus_pull_is_the_consensus_export_and_refuses_a_cursor(engine: Engine) -> None:
    with Session(engine) as session:
        alice, bob, carol = (make_user(session, name) for name in ("alice", "bob", "carol"))
        voted = make_solution(session, THREE_STEPS)
        for labeler, ratings in ((alice, [1, -1]), (bob, [1, -1]), (carol, [1, 1, 1])):
            make_rated_label(session, labeler, voted, ratings)
        tied = make_solution(session, THREE_STEPS)
        make_rated_label(session, alice, tied, [1, -1])
        make_rated_label(session, bob, tied, [1, 1, 1])
        session.commit()
        voted_id = voted.id
        expected = io.StringIO()
        write_consensus_export(session, expected, ExportFilter())
    with Session(engine) as session:
        pull = plan_pull(session, PullOptions(consensus=True))
        # Five labels, one consensus line: no count the response would not hold.
        assert COUNT_HEADER not in pull.headers()
        assert plan_pull(session, PullOptions()).headers()[COUNT_HEADER] == "5"
        with pytest.raises(PullError, match="whole consensus as of now"):
            plan_pull(session, PullOptions(consensus=True, since=pull.next_cursor))
        with pytest.raises(PullError, match="format=prm800k"):
            plan_pull(session, PullOptions(consensus=True, format="trl"))
    pulled = _pulled_until(engine, PullOptions(consensus=True), expected.getvalue())
    assert pulled == expected.getvalue()
    [line] = [json.loads(text) for text in pulled.splitlines()]
    assert line[PROVENANCE_KEY]["solution_id"] == voted_id  # the tie awaits adjudication


def test_a_trl_pull_is_the_trl_export_chunk_by_chunk(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TRL pull builds its rows a chunk of labels at a time (two a chunk here: three
    chunks for five labels); on Postgres the next chunk is read while one is sent."""
    monkeypatch.setattr(export, "CHUNK_SIZE", 2)
    with Session(engine) as session:
        labeler = make_user(session, "lab")
        for ratings in ([1, 1, 1], [1, -1], [0, 1, 1], [-1], [1, 0, -1]):
            make_rated_label(session, labeler, make_solution(session, THREE_STEPS), ratings)
        session.commit()
        expected = io.StringIO()
        write_export(session, expected, ExportFilter(), "trl")
    pulled = _pulled_until(engine, PullOptions(format="trl"), expected.getvalue())
    assert pulled == expected.getvalue()
    assert len(pulled.splitlines()) == 5


def _pulled_until(engine: Engine, options: PullOptions, expected: str) -> str:
    """A pull's text once it holds ``expected``, or the last one after 60 s: on Postgres its
    window stops at the server's horizon, which another database's open transaction holds
    back (labels come late, never lost)."""
    deadline = time.monotonic() + 60
    while True:
        with Session(engine) as session:
            pull = plan_pull(session, options)
        pulled = "".join(pull.lines())  # in its own transaction, as the API's
        if pulled == expected or time.monotonic() > deadline:
            return pulled
        time.sleep(0.2)
