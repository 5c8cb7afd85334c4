"""What every request passes through: security headers, the body size limit, which proxies
are believed about the client's address, and who may read the API schema."""

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.core.config import SettingsError, get_settings
from app.main import create_app
from app.models import LoginThrottle, Role
from tests.web import add_user, csrf_from, log_in, wait_for_imports

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ("127.0.0.1", 50000)
PROXY = ("10.0.0.5", 50000)


@pytest.fixture
def app_client(engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(), client=LOCAL) as client:
        yield client


def configure(monkeypatch: pytest.MonkeyPatch, **settings: str) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(f"STEPLABEL_{name.upper()}", value)
    get_settings.cache_clear()


# Security headers


def test_a_crash_answers_500_with_the_security_headers(engine: Engine) -> None:
    app = create_app()

    @app.get("/crash-for-the-test")
    def crash() -> None:
        raise RuntimeError("a bug")

    with TestClient(app, client=LOCAL, raise_server_exceptions=False) as client:
        response = client.get("/crash-for-the-test")
    assert response.status_code == 500
    assert response.text == "Internal Server Error"  # nothing of the exception leaks
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_every_response_carries_the_security_headers(
    app_client: TestClient, engine: Engine
) -> None:
    add_user(engine, "alice")
    token = log_in(app_client, "alice")
    responses = [
        app_client.get("/login"),
        app_client.get("/label/next"),
        app_client.get("/static/css/app.css"),
        app_client.get("/no-such-page"),
        app_client.post("/api/tasks/1/label", json={}, headers={"X-CSRF-Token": token}),
    ]
    for response in responses:
        headers = response.headers
        policy = dict(
            part.strip().split(" ", 1) for part in headers["Content-Security-Policy"].split(";")
        )
        assert policy["script-src"] == "'self'", response.url
        assert policy["frame-ancestors"] == "'none'"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "same-origin"


INLINE_SCRIPT = [
    re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE),  # a script without src
    re.compile(r"\s(?:on[a-z]+|hx-on[:\w-]*)\s*=", re.IGNORECASE),  # onclick=, hx-on::...=
    re.compile(r"javascript:", re.IGNORECASE),
    re.compile(r"<style", re.IGNORECASE),
]


def test_no_template_has_inline_script_or_style_elements() -> None:
    """The policy refuses them: they would silently not run (style attributes are allowed)."""
    for template in sorted((ROOT / "templates").rglob("*.html")):
        text = template.read_text()
        for pattern in INLINE_SCRIPT:
            match = pattern.search(text)
            assert match is None, f"{template.relative_to(ROOT)}: {match and match.group()}"


# CSRF tokens

NOT_ASCII = "é"


@pytest.mark.parametrize(
    ("path", "carried_in"),
    [
        ("/login", "form"),
        ("/api/tasks/1/label", "header"),
        ("/api/tasks/1/label", "form"),
        ("/admin/imports", "header"),
        ("/admin/imports", "multipart form"),
    ],
)
def test_a_token_that_is_not_ascii_is_refused_403(
    app_client: TestClient, engine: Engine, path: str, carried_in: str
) -> None:
    # hmac.compare_digest takes no str that is not ASCII: a 500 for anyone, until compared
    # as bytes. A header's bytes reach the app as Latin-1 text.
    if path != "/login":
        add_user(engine, "root", role=Role.ADMIN)
        log_in(app_client, "root")
    else:
        app_client.get("/login")
    if carried_in == "header":
        headers = {"X-CSRF-Token": NOT_ASCII.encode()}
        response = app_client.post(path, content=b"{}", headers=headers)
    elif carried_in == "form":
        response = app_client.post(path, data={"csrf_token": NOT_ASCII, "name": "root"})
    else:
        dataset = {"file": ("problems.jsonl", b'{"problem": "x"}\n')}
        response = app_client.post(path, data={"csrf_token": NOT_ASCII}, files=dataset)
    assert response.status_code == 403


# The body size limit


def test_a_body_over_the_limit_is_answered_413(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(monkeypatch, max_body_bytes="2048")
    with TestClient(create_app()) as client:
        token = csrf_from(client.get("/login").text)
        form = {"name": "alice", "password": "x" * 4000, "csrf_token": token}
        page = client.post("/login", data=form)
        assert page.status_code == 413
        assert page.text == "The request is too large: at most 2 KiB is accepted."
        assert "frame-ancestors" in page.headers["Content-Security-Policy"]
        # A body sent in chunks declares no length: it is counted as it arrives.
        chunks = (b"x" * 1000 for _ in range(5))
        api = client.post("/api/tasks/1/label", content=chunks, headers={"X-CSRF-Token": token})
        assert api.status_code == 413
        assert api.json() == {"detail": "The request is too large: at most 2 KiB is accepted."}


def test_an_admin_may_upload_a_larger_dataset(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(monkeypatch, max_body_bytes="2048", max_upload_bytes="65536")
    add_user(engine, "root", role=Role.ADMIN)
    add_user(engine, "alice")
    dataset = {"file": ("problems.jsonl", b'{"problem": "x"}\n' * 400)}  # 6.8 kB
    with TestClient(create_app()) as client:
        token = csrf_from(client.get("/login").text)
        headers = {"X-CSRF-Token": token}
        anonymous = client.post("/admin/imports", files=dataset, headers=headers)
        assert anonymous.status_code == 413
        # A bearer token is the import API's credential, not the Imports page's: that form
        # is read whole (to disk) before its route checks who sent it.
        bearer = {**headers, "Authorization": "Bearer slt_forged"}
        assert client.post("/admin/imports", files=dataset, headers=bearer).status_code == 413
        # A labeler is refused the upload before it is read, not after (a 403).
        token = log_in(client, "alice")
        labeler = client.post("/admin/imports", files=dataset, headers={"X-CSRF-Token": token})
        assert labeler.status_code == 413
        log_in(client, "root")
        token = csrf_from(client.get("/me").text)
        upload = client.post(
            "/admin/imports",
            data={"kind": "problems"},
            files=dataset,
            headers={"X-CSRF-Token": token},
        )
        assert upload.status_code != 413
        too_large = {"file": ("problems.jsonl", b"x" * 70_000)}
        refused = client.post("/admin/imports", files=too_large, headers={"X-CSRF-Token": token})
        assert refused.status_code == 413
        assert "at most 64 KiB" in refused.text
    wait_for_imports(engine)


# Proxies


def attempts_by_address(engine: Engine) -> set[str]:
    with Session(engine) as session:
        return set(session.scalars(select(LoginThrottle.address).where(LoginThrottle.name == "")))


def fail_login(client: TestClient, forwarded_for: str) -> None:
    token = csrf_from(client.get("/login").text)
    form = {"name": "nobody", "password": "wrong", "csrf_token": token}
    response = client.post("/login", data=form, headers={"X-Forwarded-For": forwarded_for})
    assert response.status_code == 401


def test_forwarded_addresses_are_ignored_unless_a_proxy_is_configured(
    app_client: TestClient, engine: Engine
) -> None:
    for index in range(3):
        fail_login(app_client, f"203.0.113.{index}")
    assert attempts_by_address(engine) == {"127.0.0.1"}


def test_forwarded_headers_from_an_untrusted_peer_are_warned_about_once(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Behind a reverse proxy nobody named in STEPLABEL_TRUSTED_PROXIES, every client has
    the proxy's address and shares its login limit: one attacker's failed logins would
    lock everyone out. The operator is told, once per process, not at every request."""
    with (
        caplog.at_level(logging.WARNING, logger="steplabel"),
        TestClient(create_app(), client=PROXY) as client,
    ):
        fail_login(client, "203.0.113.1")
        fail_login(client, "203.0.113.2")
    warnings = [r.getMessage() for r in caplog.records if "X-Forwarded-For" in r.getMessage()]
    assert len(warnings) == 1
    assert f"from {PROXY[0]}" in warnings[0] and "STEPLABEL_TRUSTED_PROXIES" in warnings[0]


def test_an_address_the_server_took_from_forwarded_for_is_not_believed(engine: Engine) -> None:
    """A bare ``uvicorn app.main:app`` believes X-Forwarded-For from 127.0.0.1 itself."""
    as_uvicorn_runs_it = ProxyHeadersMiddleware(create_app(), trusted_hosts="127.0.0.1")
    with TestClient(as_uvicorn_runs_it, client=LOCAL) as client:
        for forwarded_for in ("203.0.113.1", "203.0.113.2:4000", "[2001:db8::1]:80"):
            fail_login(client, forwarded_for)
        fail_login(client, "10.0.0.1, 203.0.113.3")
    assert attempts_by_address(engine) == {"unknown"}


def test_a_configured_proxy_names_the_client(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(monkeypatch, trusted_proxies="10.0.0.0/24")
    app = create_app()
    with TestClient(app, client=PROXY) as behind_proxy:
        fail_login(behind_proxy, "203.0.113.7")
        # A client's own X-Forwarded-For comes first; the proxy appends who connected.
        fail_login(behind_proxy, "198.51.100.1, 203.0.113.8")
    fail_login(TestClient(app, client=("192.0.2.9", 50000)), "203.0.113.9")
    assert attempts_by_address(engine) == {"203.0.113.7", "203.0.113.8", "192.0.2.9"}


def test_the_server_is_started_without_uvicorns_own_proxy_trust() -> None:
    """uvicorn believes X-Forwarded-For from 127.0.0.1 unless told not to; the app's own
    middleware (STEPLABEL_TRUSTED_PROXIES) decides instead."""
    launches = []
    for name in ("Makefile", "Dockerfile", "docker-compose.yml", "scripts/run.sh"):
        for line in (ROOT / name).read_text().splitlines():
            if re.search(r"uvicorn\W+app\.main:app", line):
                launches.append(line)
                assert "--no-proxy-headers" in line, f"{name}: {line.strip()}"
    assert len(launches) == 4


def test_a_bad_proxy_setting_stops_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPLABEL_TRUSTED_PROXIES", "10.0.0.1, proxy.example")
    get_settings.cache_clear()
    with pytest.raises(SettingsError, match=r"STEPLABEL_TRUSTED_PROXIES: .*'proxy\.example'"):
        get_settings()


# The API schema


def test_the_api_schema_is_for_admins_and_the_docs_pages_are_off(
    app_client: TestClient, engine: Engine
) -> None:
    for path in ("/docs", "/redoc"):
        assert app_client.get(path).status_code == 404
    anonymous = app_client.get("/openapi.json", follow_redirects=False)
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
    add_user(engine, "alice")
    log_in(app_client, "alice")
    assert app_client.get("/openapi.json").status_code == 403
    add_user(engine, "root", role=Role.ADMIN)
    log_in(app_client, "root")
    schema = app_client.get("/openapi.json").json()
    assert "/api/tasks/{assignment_id}/label" in schema["paths"]
