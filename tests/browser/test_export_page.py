"""The admin's Export page in Chromium: the download is what ``steplabel export`` writes
(PRM800K, and TRL with filters), its name carries the next pull's cursor, a pull since that
cursor gets only the newer label, and consensus is refused in words until it exists."""

import re
import time
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.datasets.export import ExportFilter, write_consensus_export, write_export
from app.models import Role, User
from tests.browser.live import ROOT, LiveApp
from tests.browser.pages import logged_in
from tests.factories import make_label, make_solution, make_user

ARTIFACTS = ROOT / "test-artifacts" / "export-page"

pytestmark = pytest.mark.both_backends  # a pull's window on Postgres stops at the horizon


@pytest.fixture(scope="module")
def labeled(live_app: LiveApp) -> LiveApp:
    """An admin, two labelers and labels in generations 0 and 1."""
    with Session(live_app.engine) as session:
        make_user(session, "exporter", role=Role.ADMIN)
        ann, ben = make_user(session, "ann"), make_user(session, "ben")
        for generation in (0, 1):
            solution = make_solution(session, generation=generation)
            make_label(session, ann, solution, [[1], [1]], total_time=10 + generation)
            make_label(session, ben, solution, [[1], [-1]], finish_reason="found_error")
        session.commit()
    return live_app


def _expected(app: LiveApp, export_format: str, label_filter: ExportFilter) -> bytes:
    out = StringIO()
    with Session(app.engine) as session:
        write_export(session, out, label_filter, export_format)
    return out.getvalue().encode()


def _download(page: Page, tmp_path: Path) -> tuple[bytes, str]:
    with page.expect_download() as started:
        page.get_by_role("button", name="Download").click()
    download = started.value
    target = tmp_path / download.suggested_filename
    download.save_as(target)
    return target.read_bytes(), download.suggested_filename


def _download_when(page: Page, tmp_path: Path, ready: Callable[[bytes], bool]) -> tuple[bytes, str]:
    """Download again until ``ready`` holds, or for 60 s: on Postgres a pull stops at the
    server's horizon, which another database's open transaction holds back (labels come
    late, never lost; README, the API's cursor)."""
    deadline = time.monotonic() + 60
    while True:
        body, name = _download(page, tmp_path)
        if ready(body) or time.monotonic() > deadline:
            return body, name
        time.sleep(0.2)


def test_the_export_page_downloads_what_export_writes(
    browser: Browser, labeled: LiveApp, tmp_path: Path
) -> None:
    with logged_in(browser, labeled, "exporter", (1280, 900)) as page:
        page.goto("/admin/export")
        expect(page.get_by_role("heading", name="Export")).to_be_visible()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "export-1280x900.png"), full_page=True)

        wanted_all = _expected(labeled, "prm800k", ExportFilter())
        everything, name = _download_when(page, tmp_path, lambda body: body == wanted_all)
        assert everything == wanted_all
        assert len(everything.splitlines()) == 4
        cursor = re.search(r"-next-(x?id-\d+)\.jsonl$", name)
        assert cursor, name

        page.get_by_role("radio", name=re.compile("TRL stepwise rows")).check()
        page.get_by_label("Generations").select_option("1")
        page.get_by_label("Labelers").select_option("ben")
        trl, _ = _download(page, tmp_path)
        wanted = ExportFilter(generations=[1], labelers=["ben"])
        assert trl == _expected(labeled, "trl", wanted)
        assert len(trl.splitlines()) == 1

        with Session(labeled.engine) as session:
            solution = make_solution(session, generation=2)
            newer = make_user(session, "cat")
            make_label(session, newer, solution, [[1]], total_time=777)
            session.commit()
        page.goto("/admin/export")
        page.get_by_label("Since (a cursor)").fill(cursor.group(1))
        since, _ = _download_when(page, tmp_path, lambda body: len(body.splitlines()) == 1)
        assert len(since.splitlines()) == 1 and b'"total_time": 777' in since

        # ann and ben split on generations 0 and 1 (awaiting adjudication): these agree.
        with Session(labeled.engine) as session:
            agreed = make_solution(session, generation=3)
            for name in ("ann", "ben"):
                labeler = session.scalars(select(User).where(User.name == name)).one()
                make_label(session, labeler, agreed, [[1], [-1]], finish_reason="found_error")
            session.commit()
        page.goto("/admin/export")
        page.get_by_role("checkbox", name=re.compile("Consensus labels")).check()
        expected = StringIO()
        with Session(labeled.engine) as session:
            write_consensus_export(session, expected, ExportFilter())
        wanted = expected.getvalue().encode()
        consensus, _ = _download_when(page, tmp_path, lambda body: body == wanted)
        assert consensus == wanted
        assert len(consensus.splitlines()) == 1 and b'"method": "unanimous"' in consensus

        page.goto("/admin/export")
        page.get_by_role("checkbox", name=re.compile("Consensus labels")).check()
        page.get_by_label("Since (a cursor)").fill(cursor.group(1))
        page.get_by_role("button", name="Download").click()
        expect(page.get_by_text("whole consensus as of now")).to_be_visible()
