"""The placeholder front pages: their queries on both databases, and the pages over HTTP."""

import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from app.admin import data as browse
from app.core.db import RETRY_AFTER_S, dispose_engines, transaction
from app.core.schema import SchemaOutOfDate
from app.main import create_app
from app.models import Label, LabelStep, Problem, Solution, StepCompletion, User
from tests.web import admin_client, csrf_from

SCRIPT_PROBLEM = "Is <script>alert(1)</script> a formula? Compute $\\frac{1}{2} + x$."


def add_problem(session: Session, text: str, **fields: Any) -> Problem:
    key = uuid.uuid4().hex
    problem = Problem(content_key=key, text_key=key, text=text, **fields)
    session.add(problem)
    session.flush()
    return problem


def add_solution(session: Session, problem: Problem, steps: list[str], **fields: Any) -> Solution:
    solution = Solution(content_key=uuid.uuid4().hex, problem_id=problem.id, steps=steps, **fields)
    session.add(solution)
    session.flush()
    return solution


def add_label(
    session: Session, labeler: User, solution: Solution, ratings: list[list[int]]
) -> Label:
    """A label with one step per entry of ``ratings``, one rated completion per rating."""
    label = Label(
        dedupe_key=uuid.uuid4().hex,
        labeler_id=labeler.id,
        problem_id=solution.problem_id,
        solution_id=solution.id,
        timestamp=datetime(2024, 1, 1),
        steps=[
            LabelStep(
                step_index=step_index,
                completions=[
                    StepCompletion(completion_index=index, text=f"step {step_index}", rating=rating)
                    for index, rating in enumerate(step_ratings)
                ],
            )
            for step_index, step_ratings in enumerate(ratings)
        ],
    )
    session.add(label)
    session.flush()
    return label


def add_user(session: Session, name: str) -> User:
    user = User(name=name)
    session.add(user)
    session.flush()
    return user


def seed(session: Session) -> dict[str, Any]:
    """Three problems (one with HTML in it), three solutions, three labels, five ratings."""
    alice, bob = add_user(session, "alice"), add_user(session, "bob")
    first = add_problem(
        session, "What is $1 + 1$?", subject="Algebra", level=1, ground_truth_answer="2"
    )
    second = add_problem(session, SCRIPT_PROBLEM, subject="Geometry", level=5)
    third = add_problem(session, "An unsolved problem.")
    solutions = [
        add_solution(session, first, ["We add.", "# Answer\n\n2"], answer="2", generation=1),
        add_solution(session, first, ["We guess.", "# Answer\n\n3"], verifier_score=0.25),
        add_solution(session, second, ["It is $\\frac{1}{2}$."], generator="gpt-4"),
    ]
    add_label(session, alice, solutions[0], [[1], [1, 0]])
    add_label(session, bob, solutions[0], [[1]])
    add_label(session, alice, solutions[2], [[-1]])
    return {"problems": [first, second, third], "solutions": solutions}


def test_totals_count_every_table(session: Session) -> None:
    assert browse.totals(session) == browse.Totals(0, 0, 0, 0, 0)
    seed(session)
    assert browse.totals(session) == browse.Totals(
        problems=3, solutions=3, labels=3, step_ratings=5, users=2
    )


def test_problem_page_counts_and_pages(session: Session) -> None:
    first, second, third = seed(session)["problems"]

    page = browse.problem_page(session, 1, per_page=2)
    assert (page.page, page.page_count, page.total) == (1, 2, 3)
    assert (page.has_previous, page.has_next) == (False, True)
    assert [(row.id, row.solution_count, row.label_count) for row in page.rows] == [
        (first.id, 2, 2),
        (second.id, 1, 1),
    ]
    assert page.rows[0].subject == "Algebra"

    last = browse.problem_page(session, 2, per_page=2)
    assert [(row.id, row.solution_count, row.label_count) for row in last.rows] == [
        (third.id, 0, 0)
    ]
    assert (last.has_previous, last.has_next) == (True, False)
    assert browse.problem_page(session, 99, per_page=2).page == 2


def test_problem_page_when_empty(session: Session) -> None:
    page = browse.problem_page(session, 3)
    assert (page.rows, page.page, page.page_count, page.total) == ([], 1, 1, 0)


def test_problem_detail(session: Session) -> None:
    data = seed(session)
    first = data["problems"][0]
    detail = browse.problem_detail(session, first.id)
    assert detail is not None
    assert detail.problem.ground_truth_answer == "2"
    assert [solution.id for solution in detail.solutions] == [s.id for s in data["solutions"][:2]]
    assert detail.label_counts == {data["solutions"][0].id: 2}
    assert browse.problem_detail(session, first.id + 1000) is None


def test_queries_take_a_fixed_number_of_statements(session: Session, engine: Engine) -> None:
    for index in range(6):
        problem = add_problem(session, f"Problem {index}")
        add_solution(session, problem, ["a step"])
    statements: list[str] = []

    def record(*args: Any) -> None:
        if args[2].lstrip().upper().startswith("SELECT"):
            statements.append(args[2])

    event.listen(engine, "before_cursor_execute", record)
    try:
        browse.problem_page(session, 1)
        assert len(statements) == 2
        statements.clear()
        detail = browse.problem_detail(session, problem.id)
        assert detail is not None and len(detail.solutions) == 1
        assert len(statements) == 3
    finally:
        event.remove(engine, "before_cursor_execute", record)


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield admin_client(client, engine)


@pytest.fixture
def seeded(engine: Engine) -> dict[str, Any]:
    with transaction(engine) as session:
        return seed(session)


def test_index_page_shows_totals_and_problems(client: TestClient, seeded: dict[str, Any]) -> None:
    response = client.get("/admin/data")
    assert response.status_code == 200
    html = response.text
    assert "<html" in html
    for name, value in [
        ("Problems", 3),
        ("Labels", 3),
        ("Step ratings", 5),
        ("Users", 3),
    ]:  # two seeded, one admin
        assert re.search(rf"<dt>{name}</dt>\s*<dd>{value}</dd>", html)
    assert "What is $1 + 1$?" in html
    assert f'href="/admin/problems/{seeded["problems"][2].id}"' in html
    assert "/static/vendor/htmx.min.js" in html
    assert "/static/js/render-math.js" in html


def test_htmx_request_gets_only_the_table(client: TestClient, seeded: dict[str, Any]) -> None:
    response = client.get("/admin/data?page=1", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "<html" not in response.text
    assert "Step ratings" not in response.text
    assert response.text.strip().startswith('<div id="problem-table">')
    assert "What is $1 + 1$?" in response.text
    assert "HX-Request" in response.headers["vary"]

    restore = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
    assert "<html" in client.get("/admin/data?page=1", headers=restore).text


def test_problem_page_escapes_html(client: TestClient, seeded: dict[str, Any]) -> None:
    problem, solution = seeded["problems"][1], seeded["solutions"][2]
    response = client.get(f"/admin/problems/{problem.id}")
    assert response.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text
    assert "<script>alert(1)" not in response.text
    assert "It is $\\frac{1}{2}$." in response.text
    assert f'id="solution-{solution.id}"' in response.text
    assert "gpt-4" in response.text


def test_problem_page_lists_numbered_steps(client: TestClient, seeded: dict[str, Any]) -> None:
    response = client.get(f"/admin/problems/{seeded['problems'][0].id}")
    assert response.status_code == 200
    assert response.text.count('<ol class="steps">') == 2
    assert "We add." in response.text and "0.250" in response.text


def test_unknown_problem_is_404(client: TestClient, seeded: dict[str, Any]) -> None:
    missing = seeded["problems"][2].id + 1000
    response = client.get(f"/admin/problems/{missing}")
    assert response.status_code == 404
    assert "<html" in response.text and f"There is no problem {missing}." in response.text

    fragment = client.get(f"/admin/problems/{missing}", headers={"HX-Request": "true"})
    assert fragment.status_code == 404
    assert "<html" not in fragment.text and "404" in fragment.text


def test_healthz_is_liveness_and_readyz_asks_the_database(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "database": "ok"}


def test_an_unreachable_database_is_503_with_retry_after_never_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", f"sqlite:///{tmp_path}/missing/steplabel.db")
    try:
        with TestClient(create_app()) as client:
            alive = client.get("/healthz")
            ready = client.get("/readyz")
            # Logging in counts the attempt in the database: a form, then htmx, then JSON.
            token = csrf_from(client.get("/login").text)
            form = {"name": "alice", "password": "x", "csrf_token": token}
            page = client.post("/login", data=form, headers={"Accept": "text/html"})
            fragment = client.post("/login", data=form, headers={"HX-Request": "true"})
    finally:
        dispose_engines()
    assert alive.status_code == 200, "the process itself is alive"
    assert ready.status_code == 503 and ready.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert ready.json() == {"status": "unavailable", "database": "OperationalError"}
    for response in (page, fragment):
        assert response.status_code == 503, response.text
        assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
        assert "The database is briefly unavailable" in response.text
    assert "<html" in page.text and "<html" not in fragment.text


def test_static_files_do_not_depend_on_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with TestClient(create_app()) as client:
        response = client.get("/static/css/app.css")
    assert response.status_code == 200
    assert "system-ui" in response.text


def test_app_refuses_to_start_on_an_unmigrated_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPLABEL_DATABASE_URL", f"sqlite:///{tmp_path}/empty.db")
    try:
        with (
            pytest.raises(SchemaOutOfDate, match="run `steplabel migrate`"),
            TestClient(create_app()),
        ):
            pass
    finally:
        dispose_engines()
