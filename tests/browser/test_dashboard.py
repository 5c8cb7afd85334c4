"""The admin dashboard in headless Chromium: htmx forms, their errors, and live figures."""

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import Role, User
from tests.browser.conftest import TIMEOUT_MS
from tests.browser.live import ROOT, LiveApp
from tests.factories import PASSWORD, make_label, make_solution, make_user

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def admin_page(browser: Browser, live_app: LiveApp) -> Iterator[Page]:
    """A fresh browser context, logged in as a new admin through the login form."""
    name = f"admin-{uuid.uuid4().hex[:6]}"
    with Session(live_app.engine) as session:
        make_user(session, name, role=Role.ADMIN)
        session.commit()
    context = browser.new_context(base_url=live_app.url, viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto("/admin")
    expect(page).to_have_url(re.compile(r"/login\?next=%2Fadmin$"))
    page.get_by_label("Name").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/admin$"))
    yield page
    context.close()


def test_the_overview_moves_when_a_label_arrives(admin_page: Page, live_app: LiveApp) -> None:
    total = admin_page.locator(".total", has_text="Labels today").locator("dd.hint")
    before = int(re.sub(r"\D", "", total.inner_text()))
    with Session(live_app.engine) as session:
        labeler = make_user(session, f"busy-{uuid.uuid4().hex[:6]}")
        make_label(session, labeler, make_solution(session), [[1], [1]])
        session.commit()
    # What the every-30-seconds timer and every admin change fire.
    admin_page.evaluate("htmx.trigger(document.body, 'dashboard-refresh')")
    expect(total).to_have_text(f"{before + 1:,} in total")
    ARTIFACTS.mkdir(exist_ok=True)
    admin_page.screenshot(path=str(ARTIFACTS / "dashboard-overview.png"), full_page=True)


def test_a_new_users_password_shows_once_and_the_table_follows(
    admin_page: Page, live_app: LiveApp
) -> None:
    admin_page.goto("/admin/users")
    name = f"zoe-{uuid.uuid4().hex[:6]}"
    admin_page.get_by_label("Name").fill(name)
    admin_page.get_by_role("button", name="Create").click()
    result = admin_page.locator("#result")
    expect(result).to_contain_text(f"Created labeler {name}.")
    expect(result.locator(".password code")).to_have_text(re.compile(r"^[a-z0-9-]{19}$"))
    expect(admin_page.get_by_label("Name")).to_have_value("")  # the form is ready again
    expect(admin_page.locator("#user-table")).to_contain_text(name)
    expect(admin_page).to_have_url(re.compile(r"/admin/users$"))
    with Session(live_app.engine) as session:
        assert session.scalar(select(User.is_approved).where(User.name == name)) is False

    admin_page.get_by_label("Name").fill(name)
    admin_page.get_by_role("button", name="Create").click()
    expect(result.locator(".form-error")).to_contain_text("already exists")
    expect(result.locator(".password")).to_have_count(0)


def test_a_bad_setting_shows_its_error_in_the_form(admin_page: Page) -> None:
    admin_page.goto("/admin/qc")
    rate = admin_page.get_by_label("QC rate")
    rate.fill("2")
    admin_page.get_by_role("button", name="Save").click()
    expect(admin_page.locator("#qc_rate-error")).to_have_text(
        "Input should be less than or equal to 1"
    )
    expect(admin_page.get_by_label("QC rate")).to_have_attribute("aria-invalid", "true")
    admin_page.get_by_label("QC rate").fill("0.1")
    admin_page.get_by_role("button", name="Save").click()
    expect(admin_page.locator("#settings-form")).to_contain_text("Saved")
    expect(admin_page.locator("#qc_rate-error")).to_have_count(0)
    admin_page.screenshot(path=str(ARTIFACTS / "dashboard-qc.png"), full_page=True)
