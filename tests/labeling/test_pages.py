"""The labeling pages over HTTP: access rules, CSRF, submitting, and the small pages."""

import re
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.auth.users import deactivate, reset_password
from app.core.db import retried_once_on_conflict
from app.labeling import repository
from app.main import create_app
from app.models import SCREENING_GENERATION, Label, Role
from app.templating import math_text, step_text
from tests.factories import PASSWORD, make_solution
from tests.web import add_user, csrf_from, log_in

STEPS = ["Add: $2+2=4$.", "So $4$.\n\n# Answer\n\n4"]
SOLVED = {
    "steps": [{"rating": 1}, {"rating": 0}],
    "finish_reason": "solution",
    "total_time": 1500,
}


@pytest.fixture
def app_client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


@pytest.fixture
def queued(engine: Engine) -> list[int]:
    with Session(engine) as session:
        ids = [make_solution(session, STEPS).id for _ in range(3)]
        session.commit()
    return ids


def task_id(html: str) -> int:
    match = re.search(r'data-task-id="(\d+)"', html)
    assert match, "no task on the page"
    return int(match.group(1))


def labeler(client: TestClient, engine: Engine, name: str = "alice") -> str:
    add_user(engine, name)
    return log_in(client, name)


def test_logged_out_pages_redirect_and_the_api_answers_401(app_client: TestClient) -> None:
    page = app_client.get("/label/next", follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=%2Flabel%2Fnext"
    fragment = app_client.get("/label/next", headers={"HX-Request": "true"})
    assert fragment.headers["HX-Redirect"].startswith("/login")
    api = app_client.post("/api/tasks/1/label", json=SOLVED)
    assert api.status_code == 401


def test_a_labeler_cannot_open_admin_pages(app_client: TestClient, engine: Engine) -> None:
    token = labeler(app_client, engine)
    for path in ("/admin", "/admin/problems/1", "/admin/guidelines"):
        response = app_client.get(path)
        assert response.status_code == 403, path
        assert "admins" in response.text
    edit = app_client.post("/admin/guidelines", data={"text": "hijacked", "csrf_token": token})
    assert edit.status_code == 403
    assert "hijacked" not in app_client.get("/guidelines").text


def test_a_labeler_cannot_touch_another_labelers_task(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    labeler(app_client, engine, "alice")
    alices_task = task_id(app_client.get("/label/next").text)
    with TestClient(create_app()) as bob:
        token = labeler(bob, engine, "bob")
        headers = {"X-CSRF-Token": token}
        assert (
            bob.post(f"/api/tasks/{alices_task}/label", json=SOLVED, headers=headers).status_code
            == 404
        )
        assert bob.post(f"/api/tasks/{alices_task}/heartbeat", headers=headers).status_code == 404
        assert task_id(bob.get("/label/next").text) != alices_task
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_state_changes_need_the_csrf_token(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    token = labeler(app_client, engine)
    task = task_id(app_client.get("/label/next").text)
    refused = app_client.post(f"/api/tasks/{task}/label", json=SOLVED)
    assert refused.status_code == 403
    wrong = app_client.post(
        f"/api/tasks/{task}/label", json=SOLVED, headers={"X-CSRF-Token": token + "x"}
    )
    assert wrong.status_code == 403
    with TestClient(create_app()) as other:
        login = other.post("/login", data={"name": "alice", "password": "x"})
        assert login.status_code == 403


def test_a_request_after_the_login_ended_answers_401_not_the_csrf_403(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    """Logged out in another tab: the open page's submit and heartbeat, with the token it
    was given, are told to log in (401), not that the form expired (403)."""
    token = labeler(app_client, engine)
    task = task_id(app_client.get("/label/next").text)
    headers = {"X-CSRF-Token": token}
    assert app_client.post("/logout", data={"csrf_token": token}).status_code == 200
    submit = app_client.post(f"/api/tasks/{task}/label", json=SOLVED, headers=headers)
    assert (submit.status_code, submit.json()) == (401, {"detail": "Please log in."})
    assert app_client.post(f"/api/tasks/{task}/heartbeat", headers=headers).status_code == 401
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_submit_is_idempotent_and_rules_answer_422(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    headers = {"X-CSRF-Token": labeler(app_client, engine)}
    task = task_id(app_client.get("/label/next").text)
    url = f"/api/tasks/{task}/label"
    broken = {**SOLVED, "steps": [{"rating": -1}, {"rating": 1}]}
    rejected = app_client.post(url, json=broken, headers=headers)
    assert rejected.status_code == 422
    assert "no steps after it" in rejected.json()["detail"]
    first = app_client.post(url, json=SOLVED, headers=headers)
    again = app_client.post(url, json=SOLVED, headers=headers)
    assert first.json()["created"] is True and again.json() == {
        "label_id": first.json()["label_id"],
        "created": False,
    }
    assert task_id(app_client.get("/label/next").text) != task
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 1


@pytest.mark.parametrize(
    "changed",
    [
        {"steps": [{"rating": 1, "flagged": "yes"}, {"rating": 0}]},
        {"steps": [{"rating": 1, "flagged": 1}, {"rating": 0}]},
        {"steps": [{"rating": "1"}, {"rating": 0}]},
        {"total_time": "5"},
        {"total_time": 5.0},
        {"total_time": True},
    ],
)
def test_a_value_of_another_type_answers_422_and_stores_nothing(
    app_client: TestClient, engine: Engine, queued: list[int], changed: dict[str, object]
) -> None:
    # Read leniently, "yes" would be a flag and "5" a time: a submit is valid, or a 422.
    headers = {"X-CSRF-Token": labeler(app_client, engine)}
    url = f"/api/tasks/{task_id(app_client.get('/label/next').text)}/label"
    refused = app_client.post(url, json={**SOLVED, **changed}, headers=headers)
    assert refused.status_code == 422, refused.text
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_a_note_over_the_limit_answers_422_and_stores_nothing(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    headers = {"X-CSRF-Token": labeler(app_client, engine)}
    page = app_client.get("/label/next").text
    assert 'data-max="2000"' in page and "0 / 2,000 characters" in page
    url = f"/api/tasks/{task_id(page)}/label"
    body = {"steps": [], "finish_reason": "give_up", "total_time": 1000}
    refused = app_client.post(url, json={**body, "note": "x" * 2001}, headers=headers)
    assert refused.status_code == 422
    assert refused.json() == {
        "detail": "the note has 2,001 characters, more than the 2,000 allowed: shorten it"
    }
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0
    saved = app_client.post(url, json={**body, "note": "x" * 2000}, headers=headers)
    assert saved.json()["created"] is True
    with Session(engine) as session:
        assert session.scalar(select(Label.note)) == "x" * 2000


def failing(times: int, error: Exception, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, failing with ``error`` on its first ``times`` calls."""
    calls = 0

    def maybe_fail(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls <= times:
            raise error
        return function(*args, **kwargs)

    return maybe_fail


DEADLOCK = psycopg.errors.DeadlockDetected("deadlock detected")
SERIALIZATION_FAILURE = OperationalError(
    "UPDATE ...", {}, psycopg.errors.SerializationFailure("could not serialize access")
)


def test_a_deadlock_or_serialization_failure_is_retried_not_answered_500(
    app_client: TestClient, engine: Engine, queued: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Postgres breaks a deadlock by failing one of its statements: the labeler must not
    # see it (psycopg's own error where the statement went to the driver directly,
    # SQLAlchemy's where it went through SQLAlchemy).
    headers = {"X-CSRF-Token": labeler(app_client, engine)}
    monkeypatch.setattr(repository, "claim_head", failing(1, DEADLOCK, repository.claim_head))
    page = app_client.get("/label/next")
    assert page.status_code == 200
    write = failing(1, SERIALIZATION_FAILURE, repository.write_label)
    monkeypatch.setattr(repository, "write_label", write)
    saved = app_client.post(f"/api/tasks/{task_id(page.text)}/label", json=SOLVED, headers=headers)
    assert saved.status_code == 200 and saved.json()["created"] is True
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 1


def test_a_conflict_is_retried_once_and_other_errors_not_at_all() -> None:
    tries: list[str] = []

    def conflicting(error: Exception) -> None:
        tries.append(type(error).__name__)
        raise error

    with pytest.raises(psycopg.errors.DeadlockDetected):
        retried_once_on_conflict(conflicting)(DEADLOCK)
    with pytest.raises(psycopg.errors.UniqueViolation):
        retried_once_on_conflict(conflicting)(psycopg.errors.UniqueViolation())
    assert tries == ["DeadlockDetected"] * 2 + ["UniqueViolation"]


def test_next_task_fragment_for_htmx(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    labeler(app_client, engine)
    fragment = app_client.get("/label/next", headers={"HX-Request": "true"}).text
    assert "<html" not in fragment and 'id="task"' in fragment
    assert fragment.count('aria-label="positive"') == len(STEPS)


def test_login_attempts_are_rate_limited(app_client: TestClient, engine: Engine) -> None:
    add_user(engine, "alice")
    token = csrf_from(app_client.get("/login").text)
    for _ in range(5):
        failed = app_client.post(
            "/login", data={"name": "alice", "password": "wrong", "csrf_token": token}
        )
        assert failed.status_code == 401
        assert "do not match" in failed.text
    blocked = app_client.post(
        "/login", data={"name": "alice", "password": PASSWORD, "csrf_token": token}
    )
    assert blocked.status_code == 429
    assert "Too many failed attempts" in blocked.text


def test_a_deactivated_user_is_logged_out(app_client: TestClient, engine: Engine) -> None:
    labeler(app_client, engine)
    assert app_client.get("/me").status_code == 200
    with Session(engine) as session:
        deactivate(session, "alice")
        session.commit()
    response = app_client.get("/me", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].startswith("/login")


def test_the_labeling_requests_end_a_login_that_ended(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    token = labeler(app_client, engine)
    task = task_id(app_client.get("/label/next").text)
    with Session(engine) as session:
        reset_password(session, "alice", "a new password, long enough")
        session.commit()
    headers = {"X-CSRF-Token": token}
    submit = app_client.post(f"/api/tasks/{task}/label", json=SOLVED, headers=headers)
    assert submit.status_code == 401
    page = app_client.get("/label/next", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login")
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0


def test_session_cookie_flags(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    add_user(engine, "alice")
    monkeypatch.setenv("STEPLABEL_SECURE_COOKIES", "true")
    from app.core.config import get_settings

    get_settings.cache_clear()
    with TestClient(create_app(), base_url="https://testserver") as client:
        response = client.get("/login")
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "secure" in cookie


def test_guidelines_are_editable_by_admins_and_rendered_safely(
    app_client: TestClient, engine: Engine
) -> None:
    add_user(engine, "admin", role=Role.ADMIN)
    token = log_in(app_client, "admin")
    text = "# Our rules\n\nRate **carefully**.\n\n<script>alert(1)</script>\n"
    saved = app_client.post(
        "/admin/guidelines", data={"text": text, "csrf_token": token}, follow_redirects=False
    )
    assert saved.status_code == 303
    page = app_client.get("/guidelines").text
    assert "<h1>Our rules</h1>" in page and "<strong>carefully</strong>" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    # The form stops where the server does, far below the body limit that would lose it.
    assert 'maxlength="100000"' in app_client.get("/admin/guidelines").text
    too_long = {"text": "é" * 100_001, "csrf_token": token}
    assert app_client.post("/admin/guidelines", data=too_long).status_code == 422


def test_guidelines_that_cannot_be_saved_come_back_in_the_editor_with_why(
    app_client: TestClient, engine: Engine
) -> None:
    add_user(engine, "admin", role=Role.ADMIN)
    token = log_in(app_client, "admin")
    before = app_client.get("/guidelines").text
    typed = "Rate with care.\r\n" * 6_000  # 102,000 characters as sent; fewer as typed
    cases = [
        ("", "The guidelines are empty: labelers would get a blank page."),
        ("  \n ", "The guidelines are empty: labelers would get a blank page."),
        (typed, "The guidelines are 102,000 characters long, more than the 100,000 they"),
        ("Rules\x00", "The guidelines must not contain the NUL character: nothing was saved."),
    ]
    for text, why in cases:
        refused = app_client.post("/admin/guidelines", data={"text": text, "csrf_token": token})
        assert refused.status_code == 422
        assert why in refused.text and "<textarea" in refused.text
    kept = app_client.post("/admin/guidelines", data={"text": typed, "csrf_token": token})
    assert "Rate with care.\r\nRate with care." in kept.text, "the admin's text is kept"
    assert app_client.get("/guidelines").text == before


def test_default_guidelines_explain_the_ratings(app_client: TestClient, engine: Engine) -> None:
    labeler(app_client, engine)
    page = app_client.get("/guidelines").text
    for word in ("Positive", "Neutral", "Negative", "Bad problem", "Give up"):
        assert word in page
    # The labeling page shows the reference answer under the problem.
    assert "reference answer, below the problem" in page and "above" not in page


def test_my_work_counts_tasks_and_median_time(
    app_client: TestClient, engine: Engine, queued: list[int]
) -> None:
    headers = {"X-CSRF-Token": labeler(app_client, engine)}
    for total_time in (0, 0):
        task = task_id(app_client.get("/label/next").text)
        body = {**SOLVED, "total_time": total_time}
        assert app_client.post(f"/api/tasks/{task}/label", json=body, headers=headers).is_success
    page = app_client.get("/me").text
    assert re.search(r"Tasks today \(UTC\)</dt><dd>2</dd>", page)
    assert re.search(r"Tasks in total</dt><dd>2</dd>", page)
    assert re.search(r"Median time per task</dt>\s*<dd>0:00</dd>", page)


def test_unapproved_labeler_without_screening_waits(app_client: TestClient, engine: Engine) -> None:
    """No screening questions were set: the page says so, not that the screening is done."""
    add_user(engine, "newcomer", approved=False)
    log_in(app_client, "newcomer")
    page = app_client.get("/label/next").text
    assert "There are no screening questions for you yet" in page
    assert "your screening is done" not in page


def test_unapproved_labeler_waits_after_answering_the_screening(
    app_client: TestClient, engine: Engine
) -> None:
    with Session(engine) as session:
        make_solution(session, STEPS, generation=SCREENING_GENERATION, overlap=1)
        session.commit()
    add_user(engine, "newcomer", approved=False)
    headers = {"X-CSRF-Token": log_in(app_client, "newcomer")}
    task = task_id(app_client.get("/label/next").text)
    assert app_client.post(f"/api/tasks/{task}/label", json=SOLVED, headers=headers).is_success

    page = app_client.get("/label/next").text
    assert "your screening is done" in page
    assert "no screening questions" not in page


@pytest.mark.parametrize(
    ("step", "html"),
    [
        ("Add: $2+2=4$.", "Add: $2+2=4$."),
        (
            "So it is $4$.\n\n# Answer\n\n4",
            'So it is $4$.<span class="step-answer"><span class="step-answer-label">Answer:'
            "</span> $4$</span>",
        ),
        (
            "# Answer\n\n\\frac{1}{2}",
            '<span class="step-answer"><span class="step-answer-label">Answer:</span>'
            " $\\frac{1}{2}$</span>",
        ),
        (
            "Done.\n# Answer\n\n$x<1$",
            'Done.<span class="step-answer"><span class="step-answer-label">Answer:</span>'
            " $x&lt;1$</span>",
        ),
    ],
)
def test_a_steps_answer_shows_under_a_label(step: str, html: str) -> None:
    assert str(step_text(step)) == html


def test_math_text_escapes_and_shows_asymptote_as_code() -> None:
    html = str(math_text("Let $x<y$.<script>x()</script>\n[asy]draw((0,0)--(1,1));[/asy] done"))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "$x&lt;y$" in html
    assert '<pre class="asy"><code>draw((0,0)--(1,1));</code></pre>' in html


def test_error_pages_keep_the_logged_in_header(app_client: TestClient, engine: Engine) -> None:
    """A path no route matched (or one refused before its route ran) still shows who is
    logged in, with the way back to their work."""
    labeler(app_client, engine)
    browser = {"Accept": "text/html"}
    for path, status in [("/tasks/999999", 404), ("/static/nope.js", 404), ("/me?page=x", 422)]:
        page = app_client.get(path, headers=browser)
        assert page.status_code == status, path
        assert '<span class="who">alice</span>' in page.text, path
    assert '<span class="who">' in app_client.get("/logout", headers=browser).text  # 405
    app_client.cookies.clear()
    assert '<span class="who">' not in app_client.get("/tasks/1", headers=browser).text
