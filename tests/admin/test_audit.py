"""The audit log: each admin action writes its entry (who, what, before and after) in the
transaction of its change, a refused or failed change writes none, the page filters them,
and the command line's changes and export are there too."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app import audit
from app.auth import users
from app.cli import cli
from app.core.config import get_settings
from app.core.db import transaction
from app.models import AuditEntry, GoldLabel, Role, Solution, TrainingRun, User
from app.project_settings import RUNTIME_KEYS
from tests.admin.conftest import Admin
from tests.admin.test_imports import finished, good_lines, upload
from tests.factories import make_label, make_solution, make_user
from tests.web import add_user


def entries(engine: Engine) -> list[AuditEntry]:
    with Session(engine) as session:
        return list(session.scalars(select(AuditEntry).order_by(AuditEntry.id)))


def only_entry(engine: Engine, action: str) -> AuditEntry:
    [entry] = entries(engine)
    assert entry.action == action
    return entry


def labeler(engine: Engine, name: str = "lee", **options: Any) -> User:
    return add_user(engine, name, **options)


# Users, passwords, sessions

USER_ACTIONS = [
    ("approve", "user.approve", {"is_approved": False}, {"is_approved": True}),
    (
        "deactivate",
        "user.deactivate",
        {"is_active": True, "session_version": 0},
        {"is_active": False, "session_version": 1},
    ),
    ("end-sessions", "user.end_sessions", {"session_version": 0}, {"session_version": 1}),
    (
        "reset-password",
        "user.reset_password",
        {"session_version": 0},
        {"session_version": 1, "password": "changed"},
    ),
]


@pytest.mark.parametrize(("path", "action", "before", "after"), USER_ACTIONS)
def test_a_change_to_a_user_is_recorded_and_an_unknown_user_records_nothing(
    admin: Admin,
    engine: Engine,
    path: str,
    action: str,
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    lee = labeler(engine, approved=False)
    missing = admin.post(f"/admin/users/{lee.id + 100}/{path}")
    assert missing.status_code == 404 and entries(engine) == []

    answer = admin.post(f"/admin/users/{lee.id}/{path}")
    assert answer.status_code == 200, answer.text

    entry = only_entry(engine, action)
    assert (entry.actor, entry.target, entry.before, entry.after) == (
        "root",
        "user lee",
        before,
        after,
    )
    assert entry.actor_id is not None
    # A new password is shown to the admin once, never written in the log.
    for password in re.findall(r"<code>([a-z0-9-]{19})</code>", answer.text):
        assert password not in json.dumps([entry.before, entry.after])


def test_a_change_that_changes_nothing_records_nothing(admin: Admin, engine: Engine) -> None:
    lee = labeler(engine)  # approved and active already
    assert admin.post(f"/admin/users/{lee.id}/approve").status_code == 200
    assert admin.post(f"/admin/users/{lee.id}/reactivate").status_code == 200
    assert entries(engine) == []


def test_reactivating_is_recorded(admin: Admin, engine: Engine) -> None:
    lee = labeler(engine)
    with Session(engine) as session:
        session.execute(update(User).where(User.id == lee.id).values(is_active=False))
        session.commit()
    assert admin.post(f"/admin/users/{lee.id}/reactivate").status_code == 200
    entry = only_entry(engine, "user.reactivate")
    assert (entry.before, entry.after) == ({"is_active": False}, {"is_active": True})


def test_deactivating_oneself_is_refused_and_records_nothing(admin: Admin, engine: Engine) -> None:
    with Session(engine) as session:
        root = session.scalars(select(User).where(User.name == "root")).one()
    refused = admin.post(f"/admin/users/{root.id}/deactivate")
    assert refused.status_code == 422 and entries(engine) == []


def test_creating_a_user_is_recorded_and_a_taken_name_records_nothing(
    admin: Admin, engine: Engine
) -> None:
    assert admin.post("/admin/users", {"name": "root"}).status_code == 422
    assert entries(engine) == []
    created = admin.post("/admin/users", {"name": "zoe", "role": "admin"})
    assert created.status_code == 200
    entry = only_entry(engine, "user.create")
    assert (entry.target, entry.before) == ("user zoe", None)
    assert entry.after == {"role": "admin", "is_approved": True, "password": "set"}


def test_api_tokens_made_and_revoked_are_recorded_and_a_refused_one_records_nothing(
    admin: Admin, engine: Engine
) -> None:
    lee = labeler(engine)
    refused = admin.post(
        "/admin/tokens", {"user_id": str(lee.id), "name": "x", "scopes": ["export"]}
    )
    assert refused.status_code == 422 and entries(engine) == []
    ada = labeler(engine, "ada", role=Role.ADMIN)  # a labeler's token is refused, as above
    made = admin.post("/admin/tokens", {"user_id": str(ada.id), "name": "ci", "scopes": ["read"]})
    assert made.status_code == 200, made.text
    secret = made.text.split('id="new-api-token">')[1].split("<")[0]
    created = only_entry(engine, "token.create")
    assert (created.actor, created.before) == ("root", None)
    assert created.after == {"scopes": "read", "expires_at": None}
    assert "'ci' for ada" in created.target
    assert secret not in json.dumps([created.target, created.after])
    token_id = int(created.target.split()[1])
    assert admin.post(f"/admin/tokens/{token_id + 100}/revoke").status_code == 404
    assert admin.post(f"/admin/tokens/{token_id}/revoke").status_code == 200
    revoked = entries(engine)[-1]
    assert (revoked.action, revoked.actor) == ("token.revoke", "root")
    assert (revoked.before, revoked.after) == ({"revoked": False}, {"revoked": True})
    # Revoking again changes nothing, records nothing and says so.
    again = admin.post(f"/admin/tokens/{token_id}/revoke")
    assert again.status_code == 200
    assert f"API token {token_id} &#39;ci&#39; was already revoked on " in again.text
    assert len(entries(engine)) == 2


# Quality control


def test_qc_settings_are_recorded_with_what_changed_and_bad_values_record_nothing(
    admin: Admin, engine: Engine
) -> None:
    settings = get_settings()
    form = {key: str(getattr(settings, key)) for key in RUNTIME_KEYS}
    refused = admin.post("/admin/qc/settings", form | {"overlap": "zero"})
    assert refused.status_code == 422 and entries(engine) == []

    assert admin.post("/admin/qc/settings", form | {"overlap": "3"}).status_code == 200
    entry = only_entry(engine, "qc.settings")
    assert entry.target == "project settings"
    assert (entry.before, entry.after) == ({"overlap": settings.overlap}, {"overlap": 3})
    # Saving the same values again changes nothing, and records nothing.
    assert admin.post("/admin/qc/settings", form | {"overlap": "3"}).status_code == 200
    assert len(entries(engine)) == 1


def gold_candidates(engine: Engine) -> tuple[int, int, int]:
    """A solution with a label, and a label of another solution."""
    with Session(engine) as session:
        lee = session.scalars(select(User).where(User.name == "root")).one()
        first, second = make_solution(session), make_solution(session)
        label = make_label(session, lee, first, [[1], [1]])
        other = make_label(session, lee, second, [[1], [-1]])
        session.commit()
        return first.id, label.id, other.id


def test_gold_labels_set_and_removed_are_recorded_and_refusals_record_nothing(
    admin: Admin, engine: Engine
) -> None:
    solution, label, other = gold_candidates(engine)
    wrong = admin.post("/admin/qc/gold", {"solution_id": str(solution), "label_id": str(other)})
    assert wrong.status_code == 422 and entries(engine) == []
    not_qc = admin.post(f"/admin/qc/{solution}/remove")
    assert not_qc.status_code == 422 and entries(engine) == []

    made = admin.post("/admin/qc/gold", {"solution_id": str(solution), "label_id": str(label)})
    assert made.status_code == 200
    entry = only_entry(engine, "qc.gold")
    assert (entry.target, entry.before, entry.after) == (
        f"solution {solution}",
        {"gold_label": None},
        {"gold_label": label},
    )
    assert admin.post(f"/admin/qc/{solution}/remove").status_code == 200
    removed = entries(engine)[-1]
    assert (removed.action, removed.before, removed.after) == (
        "qc.remove",
        {"gold_label": label},
        None,
    )
    with Session(engine) as session:
        assert session.get(GoldLabel, solution) is None


def test_sampling_for_agreement_is_recorded_and_an_empty_generation_records_nothing(
    admin: Admin, engine: Engine
) -> None:
    with Session(engine) as session:
        for _ in range(3):
            make_solution(session, generation=4)
        session.commit()
    refused = admin.post("/admin/qc/sample", {"generation": "7", "count": "2", "overlap": "2"})
    assert refused.status_code == 422 and entries(engine) == []
    # A sample of none is refused: a qc.sample entry always says solutions changed.
    for count in ("0", "-1"):
        none = admin.post("/admin/qc/sample", {"generation": "4", "count": count, "overlap": "2"})
        assert none.status_code == 422 and entries(engine) == []
    sampled = admin.post("/admin/qc/sample", {"generation": "4", "count": "2", "overlap": "2"})
    assert sampled.status_code == 200
    entry = only_entry(engine, "qc.sample")
    assert entry.target == "generation 4" and entry.after == {"overlap": 2, "solutions": 2}


# Imports, guidelines, the PRM


def test_an_upload_is_recorded_and_one_without_a_file_records_nothing(
    admin: Admin, engine: Engine
) -> None:
    refused = admin.post("/admin/imports", {"kind": "prm800k"})
    assert refused.status_code == 422 and entries(engine) == []
    answer = upload(admin, "good.jsonl", "".join(good_lines(2)).encode())
    job, _page = finished(admin, engine, answer)
    entry = only_entry(engine, "import.queue")
    assert entry.target == "file good.jsonl"
    assert entry.after == {
        "job": job.id,
        "kind": "prm800k",
        "generation": 0,
        "queue": True,
        "skip_invalid": False,
    }


def test_editing_the_guidelines_is_recorded_and_an_overlong_text_records_nothing(
    admin: Admin, engine: Engine
) -> None:
    token = {"csrf_token": admin.token}
    too_long = admin.client.post("/admin/guidelines", data={"text": "é" * 100_001, **token})
    assert too_long.status_code == 422 and entries(engine) == []
    saved = admin.client.post(
        "/admin/guidelines", data={"text": "# New rules", **token}, follow_redirects=False
    )
    assert saved.status_code == 303
    entry = only_entry(engine, "guidelines.edit")
    assert entry.after == {"text": "# New rules"}
    assert entry.before is not None and "# New rules" not in entry.before["text"]


def run_with_checkpoint(engine: Engine, path: str | None) -> int:
    with Session(engine) as session:
        run = TrainingRun(status="succeeded", checkpoint_path=path)
        session.add(run)
        session.commit()
        return run.id


def test_pins_are_recorded_and_a_run_without_a_checkpoint_records_nothing(
    admin: Admin, engine: Engine
) -> None:
    bare = run_with_checkpoint(engine, None)
    refused = admin.post(f"/admin/prm/runs/{bare}/pin")
    assert refused.status_code == 422 and entries(engine) == []
    run = run_with_checkpoint(engine, "/checkpoints/run-2")
    # Pinning a pinned run, or unpinning an unpinned one, changes nothing: no entry.
    for change in ("pin", "pin", "unpin", "unpin"):
        assert admin.post(f"/admin/prm/runs/{run}/{change}").status_code == 200
    pinned, unpinned = entries(engine)
    assert (pinned.action, pinned.before, pinned.after) == (
        "prm.pin",
        {"pinned": False},
        {"pinned": True},
    )
    assert (unpinned.action, unpinned.target) == ("prm.unpin", f"training run {run}")


def test_a_training_request_is_recorded(admin: Admin, engine: Engine) -> None:
    assert admin.post("/admin/prm/train").status_code == 200
    entry = only_entry(engine, "prm.train")
    assert entry.after == {"status": "requested"} and entry.target.startswith("training run ")


# One transaction


def test_a_change_that_fails_after_recording_leaves_neither_change_nor_entry(
    engine: Engine,
) -> None:
    with Session(engine) as session:
        make_user(session, "lee")
        session.commit()
    with pytest.raises(RuntimeError), transaction(engine) as session:
        users.change_user(session, None, "user.deactivate", "lee")
        assert session.scalar(select(AuditEntry.action)) == "user.deactivate"
        raise RuntimeError("the request failed after the change")
    assert entries(engine) == []
    with Session(engine) as session:
        assert session.scalars(select(User.is_active).where(User.name == "lee")).one() is True


def test_a_bad_value_fails_with_the_change(engine: Engine) -> None:
    """record() flushes: a value the column cannot hold fails the change it belongs to."""
    with pytest.raises((StatementError, TypeError)), transaction(engine) as session:
        make_user(session, "lee")
        audit.record(session, None, "user.create", "user lee", None, {"when": object()})
    with Session(engine) as session:
        assert session.scalar(select(User.id).where(User.name == "lee")) is None


# The page, the command line, the export


def test_the_page_filters_by_action_admin_target_and_date(admin: Admin, engine: Engine) -> None:
    lee, kim = labeler(engine, "lee"), labeler(engine, "kim")
    admin.post(f"/admin/users/{lee.id}/end-sessions")
    admin.post(f"/admin/users/{kim.id}/deactivate")
    with transaction(engine) as session:
        users.change_user(session, None, "user.end_sessions", "kim")

    def rows(query: str) -> int:
        page = admin.client.get(f"/admin/audit?{query}")
        assert page.status_code == 200
        return page.text.count('<tr id="audit-')

    assert rows("") == 3
    assert rows("action=user.end_sessions") == 2
    assert rows("actor=root") == 2 and rows("actor=command+line") == 1
    assert rows("target=KIM") == 2
    assert rows("since=2000-01-01") == 3 and rows("since=2999-01-01") == 0
    bad = admin.client.get("/admin/audit?since=yesterday")
    assert bad.status_code == 200 and "since: give a date as 2026-11-28" in bad.text
    fragment = admin.client.get("/admin/audit?actor=root", headers={"HX-Request": "true"})
    assert "<html" not in fragment.text and fragment.text.count('<tr id="audit-') == 2


def test_labelers_cannot_read_the_audit_log(app_client: Any, engine: Engine) -> None:
    from tests.web import log_in

    labeler(engine)
    log_in(app_client, "lee")
    assert app_client.get("/admin/audit").status_code == 403


def test_the_command_line_records_its_changes_and_exports_them(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    runner = CliRunner()
    with Session(engine) as session:
        make_user(session, "lee", role=Role.LABELER)
        solution = make_solution(session)
        session.commit()
        solution_id = solution.id
    assert runner.invoke(cli, ["users", "deactivate", "nobody"]).exit_code == 1
    assert runner.invoke(cli, ["qc", "remove", str(solution_id)]).exit_code == 1
    assert entries(engine) == []
    for command in (["users", "deactivate", "lee"], ["users", "add", "sam"], ["train-now"]):
        result = runner.invoke(cli, command)
        assert result.exit_code == 0, result.output
    logged = entries(engine)
    assert [e.action for e in logged] == ["user.deactivate", "user.create", "prm.train"]
    assert {e.actor for e in logged} == {audit.COMMAND_LINE}
    assert all(e.actor_id is None for e in logged)

    out = tmp_path / "audit.jsonl"
    result = runner.invoke(cli, ["export", "--format", "audit", "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == [audit.entry_record(entry) for entry in logged]
    assert lines[0]["before"] == {"is_active": True, "session_version": 0}
    with Session(engine) as session:
        assert session.scalar(select(Solution.id)) == solution_id


def test_a_command_line_import_is_recorded_and_a_bad_file_records_nothing(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    runner = CliRunner()
    problem = {
        "problem": "What is $1 + 1$?",
        "solution": "It is $\\boxed{2}$.",
        "answer": "2",
        "subject": "Prealgebra",
        "level": 1,
        "unique_id": "test/prealgebra/1.json",
    }
    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    bad.write_text(json.dumps(problem) + "\n{not json\n")
    good.write_text(json.dumps(problem) + "\n")
    assert runner.invoke(cli, ["import", "problems", str(bad)]).exit_code == 1
    assert entries(engine) == []
    result = runner.invoke(cli, ["import", "problems", str(good)])
    assert result.exit_code == 0, result.output
    entry = only_entry(engine, "import.run")
    assert entry.actor == audit.COMMAND_LINE and entry.target == f"problems: {good}"
    assert entry.after is not None and entry.after["summary"].startswith("1 line")
