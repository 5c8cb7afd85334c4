"""Adjudication in headless Chromium: an admin resolves a tied solution on its drill-down
page, first by taking one labeler's ratings, then by editing them; who and when are kept,
and the consensus export carries the decision as its provenance."""

import io
import json
import re
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, expect
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.consensus.service import PROVENANCE_KEY
from app.datasets.export import ExportFilter, write_consensus_export
from app.models import Adjudication, Role
from tests.browser.live import ROOT, LiveApp
from tests.browser.pages import logged_in
from tests.factories import make_rated_label, make_solution, make_user

ARTIFACTS = ROOT / "test-artifacts" / "adjudication"
STEPS = ["Let $x = 2$.", "Then $x^2 = 4$.", "So $x^2 + 1 = 5$.\n\n# Answer\n\n5"]


@dataclass(frozen=True)
class Tied:
    solution_id: int
    admin_uuid: str
    bob_label_id: int


@pytest.fixture(scope="module")
def tied(live_app: LiveApp) -> Tied:
    with Session(live_app.engine) as session:
        admin = make_user(session, "judge", role=Role.ADMIN)
        ann, bob = make_user(session, "ann"), make_user(session, "bob")
        solution = make_solution(session, STEPS)
        make_rated_label(session, ann, solution, [1, -1])
        bobs = make_rated_label(session, bob, solution, [1, 1, 1])
        session.commit()
        return Tied(solution.id, admin.uuid, bobs.id)


def test_an_admin_resolves_a_tie_and_the_export_says_who(
    browser: Browser, live_app: LiveApp, tied: Tied
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = f"/admin/agreement/items/{tied.solution_id}"
    with logged_in(browser, live_app, "judge", (1280, 900), start="/login?next=" + path) as page:
        page.goto(path)
        final = page.locator("#consensus")
        expect(final).to_contain_text("Needs adjudication: the labelers tie at step 2")

        page.get_by_role("button", name="Use bob's ratings").click()
        expect(page).to_have_url(re.compile(re.escape(path) + "#consensus$"))
        expect(final).to_contain_text("Adjudicated by judge at")
        expect(final).to_contain_text(f"taking the ratings of label {tied.bob_label_id}")
        expect(page.locator("th.consensus-column")).to_contain_text("adjudicated")
        page.screenshot(path=ARTIFACTS / "taken.png", full_page=True)

        # Edit: step 3 is the error after all. Keyboard only, as a new team would.
        page.get_by_label("Final rating of step 3").select_option("-1")
        page.get_by_role("button", name="Save the final ratings").click()
        expect(final).to_contain_text("ratings edited")
        expect(final).to_contain_text("found error")

        # A path PRM800K could not write is refused with the reason, nothing kept.
        page.get_by_label("Final rating of step 1").select_option("-1")
        page.get_by_role("button", name="Save the final ratings").click()
        expect(final.get_by_role("alert")).to_have_text(
            "step 1 is negative: the steps after it cannot be rated"
        )
        page.screenshot(path=ARTIFACTS / "refused.png", full_page=True)

    with Session(live_app.engine) as session:
        row = session.scalars(
            select(Adjudication).where(Adjudication.solution_id == tied.solution_id)
        ).one()
        assert row.ratings == [1, 1, -1] and row.source_label_id is None
        out = io.StringIO()
        write_consensus_export(session, out, ExportFilter())
    (line,) = [json.loads(text) for text in out.getvalue().splitlines()]
    provenance = line[PROVENANCE_KEY]
    assert provenance["method"] == "adjudicated"
    assert provenance["adjudicated_by"] == tied.admin_uuid
    assert provenance["adjudicated_at"] == row.decided_at.isoformat()
    assert [s["completions"][0]["rating"] for s in line["label"]["steps"]] == [1, 1, -1]
