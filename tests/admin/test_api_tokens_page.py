"""The Users page's API tokens: made for a user with scopes and shown once, listed with
their state and last use, revoked with a button; a labeler cannot be given export."""

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.models import ApiToken, Role, User
from tests.admin.conftest import Admin
from tests.web import add_user


def _user_id(engine: Engine, name: str) -> int:
    with Session(engine) as session:
        return session.scalars(select(User.id).where(User.name == name)).one()


def test_a_token_is_shown_once_listed_used_and_revoked(admin: Admin, engine: Engine) -> None:
    fields = {"user_id": str(_user_id(engine, "root")), "name": "pipeline"}
    made = admin.post(
        "/admin/tokens", {**fields, "scopes": ["import", "export"], "expires_days": "30"}
    )
    assert made.status_code == 200, made.text
    assert made.headers["cache-control"] == "no-store"
    secret = made.text.split('id="new-api-token">')[1].split("<")[0]
    assert secret.startswith("slt_")
    page = admin.client.get("/admin/users").text
    assert "pipeline" in page and secret not in page and secret[:10] in page
    api = {"Authorization": f"Bearer {secret}"}
    assert admin.client.get("/api/v1/labels", headers=api).status_code == 200
    with Session(engine) as session:
        token = session.scalars(select(ApiToken)).one()
        assert token.last_used_at is not None and token.expires_at is not None
        token_id = token.id
    revoked = admin.post(f"/admin/tokens/{token_id}/revoke")
    assert "revoked" in revoked.text
    assert admin.client.get("/api/v1/labels", headers=api).status_code == 401
    assert ">revoked<" in admin.client.get("/admin/users").text


def test_a_labeler_cannot_get_a_token(admin: Admin, engine: Engine) -> None:
    """Every scope is an admin's (the export, imports, their job statuses): a labeler's
    token could do nothing, so none is made, whatever its scopes."""
    add_user(engine, "lab", role=Role.LABELER)
    page = admin.client.get("/admin/users").text
    choices = page.split('<select name="user_id">')[1].split("</select>")[0]
    assert ">root</option>" in choices and "lab" not in choices
    for scopes, said in (
        (["export"], "export"),
        (["read"], "read"),
        (["read", "import"], "import, read"),
    ):
        refused = admin.post(
            "/admin/tokens",
            {"user_id": str(_user_id(engine, "lab")), "name": "x", "scopes": scopes},
        )
        assert refused.status_code == 422
        assert f"a labeler&#39;s token cannot have {said} (only admins import" in refused.text
    with Session(engine) as session:
        assert session.scalars(select(ApiToken)).all() == []


def test_a_labeler_cannot_make_tokens(app_client: object, engine: Engine) -> None:
    from fastapi.testclient import TestClient

    from tests.web import log_in

    assert isinstance(app_client, TestClient)
    add_user(engine, "lab", role=Role.LABELER)
    token = log_in(app_client, "lab")
    answer = app_client.post(
        "/admin/tokens",
        data={"user_id": "1", "name": "x", "scopes": "read"},
        headers={"X-CSRF-Token": token},
    )
    assert answer.status_code == 403
