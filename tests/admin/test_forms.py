"""The dashboard's forms: each change, its validation errors, CSRF, and what it shows."""

import re

from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.core.config import get_settings
from app.main import create_app
from app.models import (
    GoldLabel,
    ProjectSetting,
    QueueState,
    RunStatus,
    Solution,
    TrainingRun,
    User,
)
from app.project_settings import runtime_settings
from tests.admin.conftest import HTMX, Admin
from tests.factories import make_label, make_solution, make_user
from tests.web import add_user, log_in

OPEN, FULL, OUT = QueueState.OPEN, QueueState.FULL, QueueState.NOT_QUEUED


def shown_password(html: str) -> str:
    match = re.search(r"<code>([a-z0-9-]{19})</code>", html)
    assert match, "no password on the page"
    return match.group(1)


def user(engine: Engine, name: str) -> User:
    with Session(engine) as session:
        found = session.scalar(select(User).where(User.name == name))
        assert found is not None
        return found


# Users


def test_create_a_user_and_log_in_with_the_password_shown_once(
    admin: Admin, engine: Engine
) -> None:
    created = admin.post("/admin/users", {"name": "  zoe ", "role": "labeler"})
    assert created.status_code == 200
    assert created.headers["HX-Trigger"] == "dashboard-refresh"
    assert created.headers["Cache-Control"] == "no-store"
    assert "<html" not in created.text and "Created labeler zoe." in created.text
    password = shown_password(created.text)
    zoe = user(engine, "zoe")
    assert (zoe.role, zoe.is_active, zoe.is_approved) == ("labeler", True, False)
    assert password not in admin.client.get("/admin/users").text
    with TestClient(create_app()) as browser:
        log_in(browser, "zoe", password)
        assert browser.get("/me").status_code == 200


def test_create_a_user_refuses_bad_input_and_writes_nothing(admin: Admin, engine: Engine) -> None:
    for data, message in [
        ({"name": "   "}, "give the user a name"),
        ({"name": "x" * 121}, "at most 120 characters"),
        ({"name": "root"}, "a user named &#39;root&#39; already exists"),
        (
            {"name": "Root"},
            "already exists (as &#39;root&#39;: two names must differ in more than letter case)",
        ),
        ({"name": "zoe \u202eevil"}, "must not hold control or invisible characters (U+202E)"),
        ({"name": "tab\tname"}, "(U+0009)"),
        ({"name": "soft\u00adhyphen"}, "(U+00AD)"),
        ({"name": "zed", "role": "owner"}, "the role is one of labeler, admin"),
    ]:
        refused = admin.post("/admin/users", data)
        assert refused.status_code == 422, data
        assert message in refused.text
        assert "HX-Trigger" not in refused.headers
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1
    # A Persian name's zero-width non-joiner is part of how it is written.
    assert admin.post("/admin/users", {"name": "ma\u200cryam"}).status_code == 200


def test_forms_need_the_csrf_token(admin: Admin, engine: Engine) -> None:
    forged = admin.client.post("/admin/users", data={"name": "mallory"}, headers=HTMX)
    assert forged.status_code == 403
    wrong = admin.client.post(
        "/admin/prm/train", headers={**HTMX, "X-CSRF-Token": admin.token + "x"}
    )
    assert wrong.status_code == 403
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(User)) == 1
        assert session.scalar(select(func.count()).select_from(TrainingRun)) == 0


def test_without_javascript_a_form_answers_with_the_whole_page(
    admin: Admin, engine: Engine
) -> None:
    page = admin.client.post(
        "/admin/users", data={"name": "ida", "role": "admin", "csrf_token": admin.token}
    )
    assert page.status_code == 200
    assert "<html" in page.text and "Created admin ida." in page.text
    assert '<th scope="row">ida</th>' in page.text
    shown_password(page.text)


def test_approve_deactivate_and_reset_password(admin: Admin, engine: Engine) -> None:
    add_user(engine, "newbie", approved=False)
    newbie = user(engine, "newbie")
    approved = admin.post(f"/admin/users/{newbie.id}/approve")
    assert approved.status_code == 200 and "newbie is approved" in approved.text
    assert user(engine, "newbie").is_approved

    with TestClient(create_app()) as browser:
        log_in(browser, "newbie")
        reset = admin.post(f"/admin/users/{newbie.id}/reset-password")
        assert reset.status_code == 200 and reset.headers["Cache-Control"] == "no-store"
        # The reset ends the sessions the labeler had.
        assert browser.get("/me", follow_redirects=False).status_code == 303
        log_in(browser, "newbie", shown_password(reset.text))

        gone = admin.post(f"/admin/users/{newbie.id}/deactivate")
        assert gone.status_code == 200 and "newbie is deactivated" in gone.text
        assert browser.get("/me", follow_redirects=False).status_code == 303
    assert not user(engine, "newbie").is_active
    listed = admin.client.get("/admin/users").text
    assert f"/admin/users/{newbie.id}/reactivate" in listed

    back = admin.post(f"/admin/users/{newbie.id}/reactivate")
    assert back.status_code == 200 and "newbie is active again" in back.text
    assert user(engine, "newbie").is_active
    assert f"/admin/users/{newbie.id}/deactivate" in admin.client.get("/admin/users").text
    with TestClient(create_app()) as browser:
        log_in(browser, "newbie", shown_password(reset.text))
        assert browser.get("/me").status_code == 200

    root = user(engine, "root")
    refused = admin.post(f"/admin/users/{root.id}/deactivate")
    assert refused.status_code == 422 and "cannot deactivate yourself" in refused.text
    assert user(engine, "root").is_active
    assert admin.post("/admin/users/999/approve").status_code == 404


# Quality control


def test_settings_are_saved_as_runtime_settings(admin: Admin, engine: Engine) -> None:
    saved = admin.post(
        "/admin/qc/settings",
        {"qc_rate": "0.25", "overlap": "3", "screening_threshold": "0.9", "qc_min_answers": "5"},
    )
    assert saved.status_code == 200 and "Saved" in saved.text
    assert saved.text.strip().startswith('<form id="settings-form"')
    with Session(engine) as session:
        values = runtime_settings(session.connection(), get_settings())
    assert values == {
        "qc_rate": 0.25,
        "overlap": 3,
        "screening_threshold": 0.9,
        "qc_min_answers": 5,
    }


def test_a_form_saved_for_one_setting_leaves_the_others_to_the_environment(
    admin: Admin, engine: Engine
) -> None:
    """The form sends every field; only the one changed is stored over the environment's
    value, so an operator's later change of the others (STEPLABEL_OVERLAP, say) still
    takes effect."""
    with Session(engine) as session:
        shown = runtime_settings(session.connection(), get_settings())
    form = {key: str(value) for key, value in shown.items()} | {"qc_rate": "0.5"}
    assert admin.post("/admin/qc/settings", form).status_code == 200
    with Session(engine) as session:
        stored = dict(session.execute(select(ProjectSetting.key, ProjectSetting.value)).all())
    assert stored == {"qc_rate": 0.5}


def test_a_new_overlap_reopens_or_fills_the_queue(admin: Admin, engine: Engine) -> None:
    """Solutions filled at the old overlap get their further labels at a raised one (else
    they, and their generation, would wait forever); a lowered one fills those it covers.
    A solution with an overlap of its own, or out of the queue, keeps its state."""
    # (completed labels, its own overlap, state at the project's overlap of 1)
    specs = [(1, None, FULL), (2, None, FULL), (1, 1, FULL), (0, None, OPEN), (0, None, OUT)]
    with Session(engine) as session:
        ids = []
        for completed, overlap, state in specs:
            solution = make_solution(session, overlap=overlap, queue_state=state)
            solution.completed_count = completed
            ids.append(solution.id)
        session.commit()

    def states() -> list[QueueState]:
        with Session(engine) as session:
            return [session.get_one(Solution, id_).queue_state for id_ in ids]

    settings = {"qc_rate": "0", "screening_threshold": "0.8", "qc_min_answers": "1"}
    assert admin.post("/admin/qc/settings", settings | {"overlap": "2"}).status_code == 200
    assert states() == [OPEN, FULL, FULL, OPEN, OUT]
    assert admin.post("/admin/qc/settings", settings | {"overlap": "1"}).status_code == 200
    assert states() == [FULL, FULL, FULL, OPEN, OUT]


def test_bad_settings_show_their_errors_and_save_nothing(admin: Admin, engine: Engine) -> None:
    refused = admin.post(
        "/admin/qc/settings",
        {"qc_rate": "2", "overlap": "three", "screening_threshold": "0.7", "qc_min_answers": "0"},
    )
    assert refused.status_code == 422
    assert re.search(r'id="qc_rate-error">Input should be less than or equal to 1<', refused.text)
    assert re.search(r'id="overlap-error">Input should be a valid integer', refused.text)
    assert 'name="overlap" value="three"' in refused.text
    assert "screening_threshold-error" not in refused.text
    assert re.search(
        r'id="qc_min_answers-error">Input should be greater than or equal to 1<', refused.text
    )
    not_a_number = admin.post("/admin/qc/settings", {"qc_rate": "nan", "overlap": "1"}).text
    assert re.search(r'id="qc_rate-error">Input should be a finite number<', not_a_number)
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(ProjectSetting)) == 0


def test_make_and_remove_a_gold_label(admin: Admin, engine: Engine) -> None:
    with Session(engine) as session:
        root = session.scalar(select(User).where(User.name == "root"))
        assert root is not None
        solution, other = make_solution(session), make_solution(session)
        label = make_label(session, root, solution, [[1], [-1]], finish_reason="found_error")
        ids = (solution.id, other.id, label.id)
        session.commit()
    solution_id, other_id, label_id = ids
    page = admin.client.get("/admin/qc").text
    assert "Make this the gold label" in page

    wrong = admin.post("/admin/qc/gold", {"solution_id": str(other_id), "label_id": str(label_id)})
    assert wrong.status_code == 422
    assert f"label {label_id} is not a label of solution {other_id}" in wrong.text
    nowhere = admin.post("/admin/qc/gold", {"solution_id": "999999", "label_id": str(label_id)})
    assert nowhere.status_code == 422 and "there is no solution 999999" in nowhere.text
    assert admin.post("/admin/qc/gold", {"solution_id": "x", "label_id": "1"}).status_code == 422

    made = admin.post(
        "/admin/qc/gold", {"solution_id": str(solution_id), "label_id": str(label_id)}
    )
    assert made.status_code == 200 and made.headers["HX-Trigger"] == "dashboard-refresh"
    with Session(engine) as session:
        assert session.get(GoldLabel, solution_id) is not None
    page = admin.client.get("/admin/qc").text
    assert "first error at step 2" in page and '<span class="badge">gold</span>' in page

    removed = admin.post(f"/admin/qc/{solution_id}/remove")
    assert removed.status_code == 200 and "no longer a quality-control question" in removed.text
    again = admin.post(f"/admin/qc/{solution_id}/remove")
    assert again.status_code == 422 and "is not a quality-control question" in again.text
    with Session(engine) as session:
        assert session.get(GoldLabel, solution_id) is None


def test_sample_for_agreement(admin: Admin, engine: Engine) -> None:
    with Session(engine) as session:
        for _ in range(5):
            make_solution(session, generation=4)
        session.commit()
    assert '<option value="4">4 (5 open)</option>' in admin.client.get("/admin/qc").text
    sampled = admin.post("/admin/qc/sample", {"generation": "4", "count": "3", "overlap": "2"})
    assert sampled.status_code == 200 and "3 open solutions of generation 4" in sampled.text
    for data, message in [
        ({"generation": "4", "count": "3", "overlap": "200"}, "overlap: Input should be less"),
        ({"generation": "4", "count": "0", "overlap": "2"}, "at least 1"),
        ({"generation": "7", "count": "3", "overlap": "2"}, "generation 7 has no open"),
    ]:
        refused = admin.post("/admin/qc/sample", data)
        assert refused.status_code == 422 and message in refused.text, data
    with Session(engine) as session:
        overlaps = session.scalars(select(Solution.overlap).order_by(Solution.id)).all()
    assert sorted(overlaps, key=lambda o: o or 0) == [None, None, 2, 2, 2]


# The PRM


def test_train_now_asks_the_worker_once(admin: Admin, engine: Engine) -> None:
    first = admin.post("/admin/prm/train")
    again = admin.post("/admin/prm/train")
    assert first.status_code == again.status_code == 200
    with Session(engine) as session:
        runs = session.scalars(select(TrainingRun)).all()
    assert len(runs) == 1 and runs[0].status == RunStatus.REQUESTED.value
    assert runs[0].requested_by_id == user(engine, "root").id
    assert f"Training run {runs[0].id} requested." in again.text
    # That it waits is the figures' to say (once), not the answer's as well.
    assert "waiting" not in again.text
    assert f"Run {runs[0].id} is waiting for the worker" in admin.client.get("/admin/prm").text


# Figures move as labels come in


def test_figures_move_when_a_labeler_submits(admin: Admin, engine: Engine) -> None:
    with Session(engine) as session:
        root = session.scalar(select(User).where(User.name == "root"))
        assert root is not None
        question = make_solution(session, generation=0)
        gold = make_label(session, root, question, [[1], [1]])
        session.add(GoldLabel(solution_id=question.id, label_id=gold.id))
        make_user(session, "alice")
        session.commit()
    # Every task a quality-control question while one is left.
    assert (
        admin.post(
            "/admin/qc/settings", {"qc_rate": "1", "overlap": "1", "screening_threshold": "0.8"}
        ).status_code
        == 200
    )

    def figures() -> tuple[int, int, int]:
        overview = admin.client.get("/api/admin/overview").json()
        generations = admin.client.get("/api/admin/progress").json()["generations"]
        quality = {row["name"]: row for row in admin.client.get("/api/admin/quality").json()}
        return (
            overview["labels_total"],
            next(g["labels"] for g in generations if g["generation"] == 0),
            quality["alice"]["quality_control"]["answers"],
        )

    before = figures()
    with TestClient(create_app()) as alice:
        token = log_in(alice, "alice")
        task = re.search(r'data-task-id="(\d+)"', alice.get("/label/next").text)
        assert task
        body = {
            "steps": [{"rating": 1}, {"rating": 0}],
            "finish_reason": "solution",
            "total_time": 4000,
        }
        submitted = alice.post(
            f"/api/tasks/{task.group(1)}/label", json=body, headers={"X-CSRF-Token": token}
        )
        assert submitted.status_code == 200
    assert figures() == (before[0] + 1, before[1] + 1, before[2] + 1)
    alice_quality = {r["name"]: r for r in admin.client.get("/api/admin/quality").json()}["alice"]
    assert alice_quality["quality_control"]["step_accuracy"] == 0.5


def test_a_label_that_rates_no_step_cannot_be_a_gold_label(admin: Admin, engine: Engine) -> None:
    """A give-up or bad problem reported at once rates nothing: as a gold label, every answer
    would be checked against a key with nothing to agree with. It is neither offered nor
    taken; a give-up that rated steps first stays a possible key (its steps compare)."""
    with Session(engine) as session:
        root = session.scalar(select(User).where(User.name == "root"))
        assert root is not None
        labels = {
            (reason, bool(ratings)): make_label(
                session, root, make_solution(session), ratings, finish_reason=reason
            )
            for reason, ratings in (("give_up", []), ("bad_problem", []), ("give_up", [[1]]))
        }
        ids = {key: (label.solution_id, label.id) for key, label in labels.items()}
        session.commit()
    page = admin.client.get("/admin/qc").text
    offered = re.findall(r'name="label_id" value="(\d+)"', page)
    assert offered == [str(ids["give_up", True][1])]
    for key in (("give_up", False), ("bad_problem", False)):
        solution_id, label_id = ids[key]
        refused = admin.post(
            "/admin/qc/gold", {"solution_id": str(solution_id), "label_id": str(label_id)}
        )
        assert refused.status_code == 422
        expected = f"label {label_id} rates no step: a gold label needs ratings to check answers by"
        assert expected in refused.text
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(GoldLabel)) == 0
