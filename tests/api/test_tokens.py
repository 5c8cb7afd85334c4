"""API tokens: stored hashed, scopes bounded by role, refused at once when revoked, expired
or their user deactivated, never accepted from a cookie, never written to a log."""

import json
import logging
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select, text, update
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app import client
from app.auth import tokens, users
from app.cli import cli
from app.models import ApiToken, AuditEntry, Role, TokenScope, utc_now
from tests.api.conftest import ALL_SCOPES, issue, wait_for_job
from tests.factories import make_user
from tests.web import log_in


def test_a_token_is_kept_only_as_its_hash(session: Session) -> None:
    admin = make_user(session, "root", role=Role.ADMIN)
    token, secret = tokens.create_token(
        session, admin, "pipeline", tokens.parse_scopes("import,export")
    )
    stored = session.execute(select(ApiToken.__table__)).one()._asdict()
    assert secret.startswith(tokens.TOKEN_PREFIX) and len(secret) > 40
    assert all(secret not in str(value) for value in stored.values())
    assert stored["token_hash"] == tokens.hash_token(secret)
    assert token.scopes == "export,import"
    holder = tokens.token_holder(session, secret)
    assert holder is not None and holder.may(TokenScope.EXPORT)
    assert not holder.may(TokenScope.READ)


def test_revoked_expired_and_deactivated_tokens_are_refused(session: Session) -> None:
    admin = make_user(session, "root", role=Role.ADMIN)
    scopes = tokens.parse_scopes("read")
    revoked, revoked_secret = tokens.create_token(session, admin, "a", scopes)
    _expiring, expiring_secret = tokens.create_token(
        session, admin, "b", scopes, expires_at=utc_now() + timedelta(hours=1)
    )
    assert tokens.token_holder(session, revoked_secret) is not None
    tokens.revoke_token(session, revoked.id)
    assert tokens.token_holder(session, revoked_secret) is None
    assert tokens.token_holder(session, expiring_secret) is not None
    later = utc_now() + timedelta(hours=2)
    assert tokens.token_holder(session, expiring_secret, now=later) is None
    other = make_user(session, "ops", role=Role.ADMIN)
    _token, other_secret = tokens.create_token(session, other, "c", scopes)
    # A token whose user was deactivated before deactivation revoked tokens.
    other.is_active = False
    session.flush()
    assert tokens.token_holder(session, other_secret) is None
    assert tokens.token_holder(session, "slt_not-a-token") is None
    # The list says what the API does with each, and which may still be revoked.
    listed = [(view.token.name, view.state, view.revocable) for view in tokens.list_tokens(session)]
    assert listed == [
        ("a", "revoked", False),
        ("b", "active", True),
        ("c", "user deactivated", True),
    ]


def test_deactivating_a_user_revokes_their_tokens_for_good(session: Session) -> None:
    """A reactivated user's old tokens stay refused: an admin may deactivate someone
    because a token leaked."""
    root = make_user(session, "root", role=Role.ADMIN)
    ops = make_user(session, "ops", role=Role.ADMIN)
    scopes = tokens.parse_scopes("read")
    live, live_secret = tokens.create_token(session, ops, "live", scopes)
    revoked, _ = tokens.create_token(session, ops, "revoked", scopes)
    tokens.revoke_token(session, revoked.id)
    expired, _ = tokens.create_token(
        session, ops, "expired", scopes, expires_at=utc_now() + timedelta(hours=1)
    )
    expired.expires_at = utc_now() - timedelta(hours=1)
    _, roots_secret = tokens.create_token(session, root, "roots", scopes)
    session.flush()
    logged_before = session.scalar(select(func.max(AuditEntry.id)))

    users.change_user(session, root, "user.deactivate", "ops")
    users.change_user(session, root, "user.reactivate", "ops")

    assert tokens.token_holder(session, live_secret) is None
    assert tokens.token_holder(session, roots_secret) is not None
    states = {view.token.name: view.state for view in tokens.list_tokens(session)}
    assert states == {
        "live": "revoked",
        "revoked": "revoked",
        "expired": "expired",
        "roots": "active",
    }
    logged = session.execute(
        select(AuditEntry.action, AuditEntry.actor, AuditEntry.target)
        .where(AuditEntry.id > logged_before)
        .order_by(AuditEntry.id)
    ).all()
    assert logged == [
        ("token.revoke", "root", f"token {live.id} 'live'"),
        ("user.deactivate", "root", "user ops"),
        ("user.reactivate", "root", "user ops"),
    ]


def test_a_labeler_cannot_be_given_any_scope(session: Session) -> None:
    labeler = make_user(session, "lab")
    for scope in ("import", "export", "read"):
        with pytest.raises(tokens.TokenError, match="labeler"):
            tokens.create_token(session, labeler, "x", tokens.parse_scopes(scope))
    with pytest.raises(tokens.TokenError, match="unknown scope 'admin'"):
        tokens.parse_scopes("read,admin")


def test_requests_without_a_live_token_get_401(api: TestClient, engine: Engine) -> None:
    missing = api.get("/api/v1/me")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = api.get("/api/v1/me", headers={"Authorization": "Bearer slt_nonsense"})
    assert wrong.status_code == 401
    issued = issue(engine, "root", ALL_SCOPES)
    assert api.get("/api/v1/me", headers=issued.headers).json() == {
        "name": "root",
        "role": "admin",
        "scopes": ["export", "import", "read"],
    }


def test_a_revoked_token_is_refused_at_once(api: TestClient, engine: Engine) -> None:
    issued = issue(engine, "root", "export")
    assert api.get("/api/v1/labels", headers=issued.headers).status_code == 200
    with Session(engine) as session:
        tokens.revoke_token(session, issued.token_id)
        session.commit()
    refused = api.get("/api/v1/labels", headers=issued.headers)
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]


def test_a_labelers_token_can_do_nothing_an_admin_page_refuses(
    api: TestClient, engine: Engine
) -> None:
    """A token whose admin became a labeler (none is made for a labeler)."""
    issued = issue(engine, "lab", "read", role=Role.LABELER)
    # Even with the scopes written into its row by hand, the role bounds what it may do.
    with engine.begin() as connection:
        connection.execute(
            update(ApiToken).where(ApiToken.id == issued.token_id).values(scopes=ALL_SCOPES)
        )
    assert api.get("/api/v1/me", headers=issued.headers).json()["scopes"] == []
    for method, url in [
        ("GET", "/api/v1/labels"),
        ("POST", "/api/v1/imports"),
        ("GET", "/api/v1/imports/1"),
    ]:
        answer = api.request(method, url, headers=issued.headers, content=b"{}\n")
        assert answer.status_code == 403, (url, answer.text)
        assert "lab is a labeler" in answer.json()["detail"]


def test_scopes_limit_an_admins_token(api: TestClient, engine: Engine) -> None:
    importer = issue(engine, "root", "import")
    refused = api.get("/api/v1/labels", headers=importer.headers)
    assert refused.status_code == 403
    assert "'export' scope" in refused.json()["detail"]
    exporter = issue(engine, "root", "export")
    assert api.post("/api/v1/imports", headers=exporter.headers).status_code == 403


def test_the_api_takes_no_cookie_and_needs_no_csrf(api: TestClient, engine: Engine) -> None:
    issued = issue(engine, "root", ALL_SCOPES)
    log_in(api, "root")  # the client now carries an admin's session cookie
    by_cookie = api.get("/api/v1/me")
    assert by_cookie.status_code == 401
    assert "set-cookie" not in by_cookie.headers
    pushed = api.post(
        "/api/v1/imports",
        headers={**issued.headers, "Content-Type": "application/x-ndjson"},
        content=b'{"problem": "What is 1+1?", "steps": ["1+1=2\\n\\n# Answer\\n\\n2"]}\n',
    )
    assert pushed.status_code == 202, pushed.text
    assert "set-cookie" not in pushed.headers
    assert wait_for_job(api, pushed.json()["url"], issued.headers)["status"] == "succeeded"


def test_tokens_never_reach_a_log(
    api: TestClient, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    issued = issue(engine, "root", "export")
    revoked = issue(engine, "root", "read")
    with Session(engine) as session:
        tokens.revoke_token(session, revoked.token_id)
        session.commit()
    caplog.set_level(logging.DEBUG)  # SQLAlchemy's statements and their parameters too
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
    assert api.get("/api/v1/labels", headers=issued.headers).status_code == 200
    assert api.get("/api/v1/me", headers=revoked.headers).status_code == 401
    assert api.get("/api/v1/labels?since=bad", headers=issued.headers).status_code == 400
    assert caplog.records, "nothing was logged: the check would be empty"
    for secret in (issued.secret, revoked.secret):
        assert secret not in caplog.text
        assert secret[len(tokens.TOKEN_PREFIX) :] not in caplog.text


def test_the_schema_lists_the_api_for_any_token(api: TestClient, engine: Engine) -> None:
    issued = issue(engine, "lab", "read", role=Role.LABELER)
    schema = api.get("/api/v1/openapi.json", headers=issued.headers)
    assert schema.status_code == 200
    assert {"/api/v1/imports", "/api/v1/imports/{job_id}", "/api/v1/labels"} <= set(
        schema.json()["paths"]
    )
    assert api.get("/api/v1/openapi.json").status_code == 401


def test_a_pushed_batch_may_be_larger_than_a_request_and_needs_a_token(
    api: TestClient, engine: Engine
) -> None:
    issued = issue(engine, "root", "import")
    step = "x" * 100_000
    lines = [
        json.dumps({"problem": f"Problem {n}?", "steps": [f"{step} {n}\n\n# Answer\n\n{n}"]})
        for n in range(16)
    ]
    body = ("\n".join(lines) + "\n").encode()
    assert len(body) > 1 << 20  # past STEPLABEL_MAX_BODY_BYTES's default
    ndjson = {"Content-Type": "application/x-ndjson"}
    pushed = api.post("/api/v1/imports", headers={**issued.headers, **ndjson}, content=body)
    assert pushed.status_code == 202, pushed.text
    job = wait_for_job(api, pushed.json()["url"], issued.headers)
    assert job["status"] == "succeeded" and "16 solutions added" in job["summary"]
    forged = {"Authorization": "Bearer slt_forged", **ndjson}
    assert api.post("/api/v1/imports", headers=forged, content=body).status_code == 401
    assert api.post("/api/v1/imports", headers=ndjson, content=body).status_code == 413


def test_a_pushed_batch_is_in_the_audit_log_and_a_refused_one_is_not(
    api: TestClient, engine: Engine
) -> None:
    issued = issue(engine, "root", "import")
    json_body = {**issued.headers, "Content-Type": "application/json"}
    assert api.post("/api/v1/imports", headers=json_body, content=b"[{").status_code == 400
    items = [{"problem": "What is 1+1?", "steps": ["2"]}]
    pushed = api.post("/api/v1/imports?name=run8.json&queue=false", headers=json_body, json=items)
    assert pushed.status_code == 202, pushed.text
    job = wait_for_job(api, pushed.json()["url"], issued.headers)
    with Session(engine) as session:
        [entry] = session.scalars(select(AuditEntry).where(AuditEntry.action != "token.create"))
    assert (entry.action, entry.actor_id, entry.target) == (
        "import.push",
        issued.user_id,
        "batch run8.json",
    )
    assert entry.before is None
    assert entry.after == {
        "job": job["id"],
        "kind": "solutions",
        "generation": 0,
        "queue": False,
        "token": issued.token_id,
    }


def test_a_json_batch_names_its_bad_item(api: TestClient, engine: Engine) -> None:
    issued = issue(engine, "root", "import")
    items = [{"problem": "What is 1+1?", "steps": ["2"]}, {"problem": "What is 2+2?"}]
    pushed = api.post("/api/v1/imports?name=run7.json", headers=issued.headers, json=items)
    assert pushed.status_code == 202, pushed.text
    job = wait_for_job(api, pushed.json()["url"], issued.headers)
    assert job["status"] == "failed"
    assert job["errors"] == [
        {"line": 2, "message": "give exactly one of 'steps' (a list) or 'solution' (text)"}
    ]
    refused = api.post(
        "/api/v1/imports",
        headers={**issued.headers, "Content-Type": "application/json"},
        content=b"[{",
    )
    assert refused.status_code == 400
    assert "not a JSON document" in refused.json()["detail"]


def test_a_token_for_no_named_user_needs_exactly_one_active_admin(engine: Engine) -> None:
    create = ["tokens", "create", "pipeline", "--scopes", "import"]
    none = CliRunner().invoke(cli, create)
    assert none.exit_code == 1
    assert none.stderr.strip() == "there is no active admin: name the token's user with --user"
    with Session(engine) as session:
        make_user(session, "ada", role=Role.ADMIN)
        make_user(session, "bo", role=Role.ADMIN)
        session.commit()
    several = CliRunner().invoke(cli, create)
    assert several.exit_code == 1
    expected = "there are several admins: name the token's user with --user"
    assert several.stderr.strip() == expected
    named = CliRunner().invoke(cli, [*create, "--user", "bo"])
    assert named.exit_code == 0 and "for bo (import)" in named.stdout


def test_the_client_says_what_the_server_refused_in_words(api: TestClient, engine: Engine) -> None:
    """Answers of the real app, as the client reports them: a validation error by where and
    what, an HTML page (a wrong URL) by what to check, not the raw body."""
    issued = issue(engine, "root", "import")
    wrong_kind = api.post("/api/v1/imports?kind=solution&generation=-5", headers=issued.headers)
    with pytest.raises(client.ApiError) as refused:
        client._check(wrong_kind)
    assert str(refused.value) == (
        "the server answered 422: query kind: Input should be 'solutions', 'problems' or "
        "'prm800k'; query generation: Input should be greater than or equal to -1"
    )
    elsewhere = api.get("/steplabel/api/v1/me", headers=issued.headers)
    assert elsewhere.headers["content-type"].startswith("text/html")
    with pytest.raises(client.ApiError) as missing:
        client._check(elsewhere)
    assert str(missing.value) == (
        "the server answered 404: no steplabel API at http://testserver/steplabel/api/v1/me "
        "(is the URL the server's root?)"
    )


def test_revoking_twice_says_the_second_time_that_nothing_changed(
    engine: Engine, api: TestClient
) -> None:
    issued = issue(engine, "root", "read")
    first = CliRunner().invoke(cli, ["tokens", "revoke", str(issued.token_id)])
    assert first.exit_code == 0
    assert first.stdout.strip() == (
        f"API token {issued.token_id} 'test' revoked: refused from its next request on."
    )
    again = CliRunner().invoke(cli, ["tokens", "revoke", str(issued.token_id)])
    assert again.exit_code == 0
    assert f"API token {issued.token_id} 'test' was already revoked on " in again.stdout
    assert "refused from its next request on" not in again.stdout
    missing = CliRunner().invoke(cli, ["tokens", "revoke", str(issued.token_id + 1)])
    assert missing.exit_code == 1
    assert missing.stderr.strip() == f"there is no API token {issued.token_id + 1}"
