"""The dashboard's pages over HTTP: what they show, their htmx fragments, the JSON twins."""

import json
import re
import time
from datetime import timedelta

import pytest
from fastapi.encoders import jsonable_encoder
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.admin.progress import progress
from app.admin.throughput import WINDOWS, throughput
from app.core.db import transaction
from app.models import Generation, RunStatus, TrainingRun, User, utc_now
from app.quality.questions import mark_quality_control
from app.quality.scoring import labeler_quality
from tests.admin.conftest import HTMX, Admin
from tests.factories import make_label, make_solution, make_user, prm_run_metrics

HOSTILE_NAME = "<b>eve</b>"
HOSTILE_NOTE = "<script>alert('note')</script>"


def seed(engine: Engine) -> None:
    now = utc_now()
    with transaction(engine) as session:
        root = session.query(User).filter_by(name="root").one()
        ann, eve = make_user(session, "ann"), make_user(session, HOSTILE_NAME)
        make_user(session, "newbie", approved=False)
        gold = make_solution(session, generation=2)
        mark_quality_control(session, gold.id, make_label(session, root, gold, [[1], [1]]).id)
        make_label(session, ann, gold, [[1], [1]], timestamp=now - timedelta(hours=1))
        make_label(session, eve, gold, [[-1]], finish_reason="found_error", timestamp=now)
        regular = make_solution(session, generation=2, overlap=2)
        make_label(
            session,
            eve,
            regular,
            [],
            finish_reason="bad_problem",
            note=HOSTILE_NOTE,
            timestamp=now - timedelta(minutes=5),
        )
        run = TrainingRun(
            status=RunStatus.SUCCEEDED.value,
            is_current=True,
            metrics=prm_run_metrics(),
            checkpoint_path="checkpoints/run-1",
            labels_used=3,
        )
        session.add(run)
        session.flush()
        session.add(Generation(number=2, run_id=run.id, selected=4, wrong_answers=3))


def tiles(html: str) -> dict[str, str]:
    return {
        re.sub(r"<[^>]+>", "", name).strip(): value.strip()
        for name, value in re.findall(r"<dt>(.*?)</dt>\s*<dd[^>]*>(.*?)</dd>", html, re.S)
    }


def test_overview_shows_the_headline_figures(admin: Admin, engine: Engine) -> None:
    seed(engine)
    page = admin.client.get("/admin")
    assert page.status_code == 200
    figures = tiles(page.text)
    assert "4 in total" in page.text
    # ann and eve answered one QC question each: too few for a verdict by default.
    assert figures["Passing QC"] == "0 of 0"
    assert "a verdict after 3 answers" in page.text
    verdict_after_one_answer(admin)
    assert tiles(admin.client.get("/admin").text)["Passing QC"] == "1 of 2"
    assert figures["Awaiting approval"] == "1"
    assert figures["Current PRM"].startswith("run ")
    assert "Labels per hour, last 24 hours" in page.text and "<svg" in page.text
    assert HOSTILE_NAME not in page.text


def test_progress_page_shows_generations_and_escaped_notes(admin: Admin, engine: Engine) -> None:
    seed(engine)
    page = admin.client.get("/admin/progress").text
    assert re.search(r'<th scope="row" class="num">2</th>', page)
    assert "bad problem 1" in page
    assert HOSTILE_NOTE not in page and "&lt;script&gt;alert(&#39;note&#39;)&lt;/script&gt;" in page
    assert "&lt;b&gt;eve&lt;/b&gt;" in page


def test_throughput_page_and_its_windows(admin: Admin, engine: Engine) -> None:
    seed(engine)
    page = admin.client.get("/admin/throughput?window=24h").text
    assert 'aria-current="page">Last 24 hours' in page
    # ann, eve and newbie; not root, whose only label (the gold one) is older.
    assert page.count('class="sparkline"') == 3
    assert "&lt;b&gt;eve&lt;/b&gt;" in page and HOSTILE_NAME not in page
    missing = admin.client.get("/admin/throughput?window=1y")
    assert missing.status_code == 404 and "choose one of 24h, 7d, 30d" in missing.text


def verdict_after_one_answer(admin: Admin) -> None:
    """Set the QC answers for a verdict to one, through the QC page's form."""
    settings = {"overlap": "1", "qc_rate": "0.05", "screening_threshold": "0.8"}
    assert admin.post("/admin/qc/settings", settings | {"qc_min_answers": "1"}).status_code == 200


def test_qc_page_names_who_fails(admin: Admin, engine: Engine) -> None:
    seed(engine)
    verdict_after_one_answer(admin)
    page = admin.client.get("/admin/qc").text
    failing = page[page.index("Who fails QC") : page.index("Labelers against gold")]
    assert "&lt;b&gt;eve&lt;/b&gt;" in failing and "ann" not in failing
    assert 'name="screening_threshold" value="0.8"' in page


def test_users_page_lists_who_awaits_approval_first(admin: Admin, engine: Engine) -> None:
    seed(engine)
    page = admin.client.get("/admin/users").text
    names = re.findall(r'<th scope="row">([^<]+)</th>', page)
    assert names[0] == "newbie" and set(names) >= {"root", "ann"}
    assert "awaiting approval" in page
    # No one deactivates themselves: root's row has no such button.
    root_row = page[page.index('<th scope="row">root</th>') :].split("</tr>")[0]
    assert "Deactivate" not in root_row and "Reset password" in root_row


def test_prm_page_shows_the_current_checkpoint_and_generations(
    admin: Admin, engine: Engine
) -> None:
    seed(engine)
    page = admin.client.get("/admin/prm").text
    assert "checkpoints/run-1" in page
    assert tiles(page)["Labels used"] == "3"
    assert "0.712" in page and "[0.660, 0.750]" in page
    assert "75.0%" in page  # generation 2's yield: 3 wrong of 4
    assert "Step AUROC per run" in page


@pytest.mark.parametrize(
    ("path", "block_id"),
    [
        ("/admin", "figures"),
        ("/admin/progress", "figures"),
        ("/admin/throughput?window=7d", "figures"),
        ("/admin/qc", "quality"),
        ("/admin/users", "user-table"),
        ("/admin/prm", "figures"),
    ],
)
def test_htmx_refreshes_get_only_the_live_block(
    admin: Admin, engine: Engine, path: str, block_id: str
) -> None:
    seed(engine)
    fragment = admin.client.get(path, headers=HTMX)
    assert fragment.status_code == 200
    assert "<html" not in fragment.text
    opening = fragment.text.strip().split(">", 1)[0]
    assert opening.startswith(f'<div id="{block_id}"')
    assert f'hx-get="{path}"' in opening
    assert 'hx-trigger="every 30s, dashboard-refresh from:body"' in opening
    assert "<html" in admin.client.get(path).text


def test_json_twins_give_the_services_figures(admin: Admin, engine: Engine) -> None:
    seed(engine)
    with Session(engine) as session:
        expected = {
            "/api/admin/progress": progress(session, default_overlap=1),
            "/api/admin/quality": labeler_quality(session, threshold=0.8, min_answers=3),
        }
        window = throughput(session, WINDOWS["7d"])
    for path, figures in expected.items():
        assert admin.client.get(path).json() == jsonable_encoder(figures), path
    answer = admin.client.get("/api/admin/throughput").json()
    assert answer["overall"]["labels"] == window.overall.labels == 3  # the gold label is older
    overview = admin.client.get("/api/admin/overview").json()
    assert (overview["labelers_passing_qc"], overview["labelers_with_qc"]) == (0, 0)
    runs = admin.client.get("/api/admin/prm").json()
    assert runs["current"]["step_auroc"]["value"] == 0.712


def test_an_admin_without_data_sees_empty_pages(admin: Admin) -> None:
    for path in ("/admin", "/admin/progress", "/admin/throughput", "/admin/qc", "/admin/prm"):
        page = admin.client.get(path)
        assert page.status_code == 200, path
        assert 'class="empty"' in page.text, path


def test_qc_page_counts_answers_until_a_verdict(admin: Admin, engine: Engine) -> None:
    seed(engine)
    page = admin.client.get("/admin/qc").text
    assert page.count('<span class="verdict none">1 of 3 answers</span>') == 2  # ann and eve
    assert 'name="qc_min_answers" value="3"' in page
    assert "No labeler with 3 or more answers is below the threshold" in page


def test_the_export_page_offers_the_labels_without_a_generation(
    admin: Admin, engine: Engine
) -> None:
    """Phase 1's labels have no generation: the Export page offers them as "none", as the
    Progress and Agreement pages do, and the download takes it beside numbers."""
    with Session(engine) as session:
        labeler = make_user(session, "lab")
        for generation in (None, 0, 1):
            make_label(session, labeler, make_solution(session, generation=generation), [[1]])
        session.commit()
    page = admin.client.get("/admin/export").text
    assert '<option value="none">none (phase 1)</option>' in page

    def generations(*chosen: str) -> list[int | None]:
        download = admin.client.get("/admin/export/download", params={"generation": chosen})
        assert download.status_code == 200, download.text
        return sorted(
            (json.loads(line)["generation"] for line in download.text.splitlines()),
            key=lambda g: -1 if g is None else g,
        )

    # A download stops at the server's horizon, which another test process's open
    # transaction (in any database) holds back: wait until all three labels are past it.
    deadline = time.monotonic() + 60
    while len(generations()) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert generations() == [None, 0, 1]
    assert generations("none") == [None]
    assert generations("none", "1") == [None, 1]
