"""What no client may send, refused with a 4xx that says why instead of failing as a 500:
numbers past an INTEGER column (Postgres: 2**31 - 1), NaN and Infinity in JSON, NUL and lone
surrogates in text. Every route of the schema that takes an id, a generation or a page is
tried, on SQLite and on Postgres."""

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.inputs import INTEGER_MAX, json_safe
from app.main import create_app
from app.models import ImportJob, Label, Role, User
from tests.admin.conftest import HTMX
from tests.api.conftest import ALL_SCOPES, issue
from tests.factories import make_solution
from tests.web import add_user, csrf_from, log_in

TOO_BIG = (2**31, 2**63)
"""Past Postgres' INTEGER, and past SQLite's (and Postgres' BIGINT) too."""
BIGGEST = f"{INTEGER_MAX:,}"
GIVE_UP = {"steps": [], "finish_reason": "give_up", "total_time": 1500, "note": "stuck"}


def _schema_operations() -> list[tuple[str, str, dict[str, Any]]]:
    paths = create_app().openapi()["paths"]
    return [
        (method.upper(), path, operation)
        for path, operations in paths.items()
        for method, operation in operations.items()
    ]


def _integer_parameters(where: str) -> list[tuple[str, str, str]]:
    """(method, path, name) of every integer parameter ``where`` (path or query)."""
    found = []
    for method, path, operation in _schema_operations():
        for parameter in operation.get("parameters", []):
            schema = parameter["schema"]
            types = {option.get("type") for option in schema.get("anyOf", [schema])}
            if parameter["in"] == where and "integer" in types:
                found.append((method, path, parameter["name"]))
    return found


PATH_IDS = _integer_parameters("path")
QUERY_NUMBERS = _integer_parameters("query")


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        yield client


@pytest.fixture
def admin_token(client: TestClient, engine: Engine) -> str:
    add_user(engine, "root", role=Role.ADMIN)
    return log_in(client, "root")


@pytest.fixture
def bearer(admin_token: str, engine: Engine) -> dict[str, str]:
    """The admin's API token, for the token API (/api/v1), which takes no cookie."""
    return issue(engine, "root", ALL_SCOPES).headers


@pytest.fixture
def task(client: TestClient, engine: Engine) -> tuple[str, int]:
    """A labeler's CSRF token and the id of the task they hold."""
    with Session(engine) as session:
        make_solution(session)
        session.commit()
    add_user(engine, "alice")
    token = log_in(client, "alice")
    match = re.search(r'data-task-id="(\d+)"', client.get("/label/next").text)
    assert match, "no task on the page"
    return token, int(match.group(1))


def _refused_number(response: httpx.Response, where: str, name: str) -> None:
    assert response.status_code == 422, (response.request.url, response.text)
    [error] = response.json()["detail"]
    assert error["loc"] == [where, name]
    assert error["msg"] == f"Input should be less than or equal to {INTEGER_MAX}"


def test_every_id_and_number_parameter_is_found() -> None:
    ids = {"assignment_id", "problem_id", "solution_id", "user_id", "run_id"}
    assert ids <= {name for _, _, name in PATH_IDS}
    assert {"generation", "page"} <= {name for _, _, name in QUERY_NUMBERS}


def test_an_id_past_integer_answers_422(
    client: TestClient, admin_token: str, bearer: dict[str, str]
) -> None:
    for (method, path, name), number in itertools.product(PATH_IDS, TOO_BIG):
        url = path.replace("{" + name + "}", str(number))
        # A valid body where there is one, so that the id is all that is wrong.
        headers = {"X-CSRF-Token": admin_token, **bearer}
        _refused_number(client.request(method, url, json=GIVE_UP, headers=headers), "path", name)


def test_a_generation_or_page_past_integer_answers_422(
    client: TestClient, admin_token: str, bearer: dict[str, str]
) -> None:
    for (method, path, name), number in itertools.product(QUERY_NUMBERS, TOO_BIG):
        answer = client.request(method, path, params={name: number}, headers=bearer)
        _refused_number(answer, "query", name)


def test_a_form_number_past_integer_is_refused_with_its_name(
    client: TestClient, admin_token: str
) -> None:
    upload = {"file": ("s.jsonl", b'{"problem": "1+1?", "steps": ["2"]}\n', "application/jsonl")}
    for url, form, files, name in [
        ("/admin/qc/gold", {"solution_id": str(2**31), "label_id": "1"}, None, "solution"),
        ("/admin/qc/gold", {"solution_id": "1", "label_id": str(2**63)}, None, "label"),
        (
            "/admin/qc/sample",
            {"generation": str(2**31), "count": "1", "overlap": "2"},
            None,
            "generation",
        ),
        ("/admin/imports", {"kind": "solutions", "generation": str(2**31)}, upload, "generation"),
    ]:
        headers = {**HTMX, "X-CSRF-Token": admin_token}
        response = client.post(url, data=form, files=files, headers=headers)
        assert response.status_code == 422, (url, form)
        assert f"{name}: give a number of at most {BIGGEST}" in response.text


def test_nan_or_infinity_in_a_json_body_answers_422(
    client: TestClient, engine: Engine, task: tuple[str, int]
) -> None:
    for constant in ("NaN", "Infinity", "-Infinity"):
        body = f'{{"steps": [], "finish_reason": "give_up", "total_time": {constant}, "note": "x"}}'
        response = _submit(client, task, body)
        assert response.status_code == 422
        # json reads "-Infinity" as one constant.
        assert response.json() == {
            "detail": f"The body is not valid JSON: {constant} is not a JSON number."
        }
    _no_label(engine)


def test_a_note_with_nul_or_a_lone_surrogate_answers_422(
    client: TestClient, engine: Engine, task: tuple[str, int]
) -> None:
    for note, message in [
        ("stuck\x00", "must not contain the NUL character"),
        ("stuck \ud800", "must be valid Unicode, without lone surrogates"),
    ]:
        response = _submit(client, task, json.dumps({**GIVE_UP, "note": note}))
        assert response.status_code == 422
        [error] = response.json()["detail"]
        assert error["loc"] == ["body", "note"]
        assert error["msg"] == f"Value error, {message}"
    _no_label(engine)


def test_a_refused_lone_surrogate_is_echoed_as_an_escape(
    client: TestClient, engine: Engine, task: tuple[str, int]
) -> None:
    response = _submit(client, task, json.dumps({**GIVE_UP, "finish_reason": "\ud800"}))
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert (error["loc"], error["input"]) == (["body", "finish_reason"], "\\ud800")
    _no_label(engine)


def test_a_login_name_with_nul_answers_422(client: TestClient) -> None:
    token = csrf_from(client.get("/login").text)
    response = client.post(
        "/login", data={"name": "alice\x00", "password": "x", "csrf_token": token}
    )
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "name"]
    assert error["msg"] == "Value error, must not contain the NUL character"


def test_admin_text_with_nul_answers_422(
    client: TestClient, engine: Engine, admin_token: str
) -> None:
    headers = {**HTMX, "X-CSRF-Token": admin_token}
    form = {"name": "zoe\x00", "role": "labeler"}
    response = client.post("/admin/users", data=form, headers=headers)
    assert response.status_code == 422
    # The form's htmx swap gets the error block, which names the field.
    assert "<p>name: Value error, must not contain the NUL character.</p>" in response.text
    # The guidelines editor comes back whole, with why and the text (tests/labeling).
    guidelines = client.post("/admin/guidelines", data={"text": "\x00"}, headers=headers)
    assert guidelines.status_code == 422
    assert "The guidelines must not contain the NUL character: nothing was saved." in (
        guidelines.text
    )
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1


def test_an_upload_whose_file_name_has_nul_is_refused(
    client: TestClient, engine: Engine, admin_token: str
) -> None:
    # Written by hand: an HTTP client percent-encodes the NUL in a file's name.
    body = (
        b'--XX\r\nContent-Disposition: form-data; name="kind"\r\n\r\nproblems\r\n'
        b'--XX\r\nContent-Disposition: form-data; name="file"; filename="a\x00b.jsonl"\r\n'
        b'Content-Type: application/jsonl\r\n\r\n{"problem": "1+1?"}\n\r\n--XX--\r\n'
    )
    content_type = "multipart/form-data; boundary=XX"
    headers = {**HTMX, "X-CSRF-Token": admin_token, "Content-Type": content_type}
    response = client.post("/admin/imports", content=body, headers=headers)
    assert response.status_code == 422
    assert "the file&#39;s name must not contain the NUL character" in response.text
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ImportJob)) == 0


def test_json_safe_spells_out_what_json_cannot_carry() -> None:
    value = {"\ud800": [float("nan"), float("-inf"), 1.5, "ok", ("a\udfff",)]}
    assert json_safe(value) == {"\\ud800": ["nan", "-inf", 1.5, "ok", ["a\\udfff"]]}


def _submit(client: TestClient, task: tuple[str, int], body: str) -> httpx.Response:
    """Post a label as written: json.dumps escapes a lone surrogate, as a client may."""
    token, assignment = task
    return client.post(
        f"/api/tasks/{assignment}/label",
        content=body,
        headers={"Content-Type": "application/json", "X-CSRF-Token": token},
    )


def _no_label(engine: Engine) -> None:
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Label)) == 0


BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
"""What a browser's navigation and form posts ask for."""


def test_a_browser_gets_a_page_that_names_the_refused_field(
    client: TestClient, admin_token: str
) -> None:
    """Pages answer a refused query with an HTML page (a fragment for htmx), API clients
    with FastAPI's JSON."""
    page = client.get("/admin/data?page=abc", headers=BROWSER)
    assert page.status_code == 422 and page.headers["content-type"].startswith("text/html")
    assert "422 · Invalid request" in page.text
    assert "page: Input should be a valid integer" in page.text
    assert "<html" in page.text

    fragment = client.get("/admin/data?page=abc", headers={**BROWSER, **HTMX})
    assert fragment.status_code == 422 and "<html" not in fragment.text
    assert "page: Input should be a valid integer" in fragment.text

    api = client.get("/admin/data?page=abc")  # no Accept: an API client
    assert api.json()["detail"][0]["loc"] == ["query", "page"]
    assert client.get("/api/admin/agreement?generation=x", headers=BROWSER).json()["detail"]


def test_a_refused_login_name_is_not_echoed(client: TestClient) -> None:
    token = csrf_from(client.get("/login").text)
    name = "n" * 5000

    refused = client.post(
        "/login", data={"name": name, "password": "x", "csrf_token": token}, headers=BROWSER
    )

    assert refused.status_code == 422
    assert re.search(r"<p>name: [^<]*at most 120\b", refused.text)
    assert name not in refused.text
    assert 'maxlength="120"' in client.get("/login").text
