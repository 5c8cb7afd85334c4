"""The admin dashboard in headless Chromium: htmx forms, their errors, and live figures."""

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import krippendorff
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.models import Role, Solution, User
from app.templating import decimal
from tests.browser.conftest import TIMEOUT_MS
from tests.browser.live import ROOT, Labeler, LiveApp, SolutionSpec, add_labeler, queue
from tests.browser.pages import log_in, press, task_swap, wait_for_task
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


@contextmanager
def labeling_page(browser: Browser, live_app: LiveApp, labeler: Labeler) -> Iterator[Page]:
    """A fresh browser context in which ``labeler`` has logged in and has a task open."""
    context = browser.new_context(base_url=live_app.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        log_in(page, labeler)
        yield page
    finally:
        context.close()


def label(page: Page, steps: int, keys: str) -> None:
    """Rate the open task with ``keys`` (3 positive, 2 neutral, 1 negative) and submit it."""
    wait_for_task(page, steps)
    press(page, keys)
    with task_swap(page):
        page.keyboard.press("Enter")


def test_two_labelers_label_the_same_solutions_and_agreement_follows(
    browser: Browser, admin_page: Page, live_app: LiveApp
) -> None:
    shared = queue(
        live_app.engine,
        SolutionSpec(["Let $x = 2$.", "Then $2x = 4$.", "So $2x + 1 = 5$.\n\n# Answer\n\n5"]),
        SolutionSpec(["Add $3$ and $3$.", "So it is $6$.\n\n# Answer\n\n6"]),
    )
    with Session(live_app.engine) as session:
        session.execute(update(Solution).where(Solution.id.in_(shared)).values(overlap=2))
        session.commit()
    # The admin watches the overview in one tab and the agreement page in another; neither
    # is loaded again: the figures come in through htmx.
    overview = admin_page
    agreement = admin_page.context.new_page()
    agreement.goto("/admin/agreement")
    expect(agreement.locator("#overall-solutions")).to_have_text("0")
    expect(agreement.locator("#overall-krippendorff_alpha")).to_have_text("—")
    for tab in (overview, agreement):
        tab.evaluate("window.__marker = 'no reload'")

    suffix = uuid.uuid4().hex[:6]
    ann, ben = (add_labeler(live_app.engine, f"{name}-{suffix}") for name in ("ann", "ben"))
    with (
        labeling_page(browser, live_app, ann) as anns,
        labeling_page(browser, live_app, ben) as bens,
    ):
        label(anns, 3, "333")
        label(bens, 3, "321")  # neutral at step 2, an error at step 3
        label(anns, 2, "33")
        label(bens, 2, "32")

    # The reference: both labelers' ratings of the five steps both reached.
    alpha = krippendorff.alpha(
        reliability_data=[[1, 1, 1, 1, 1], [1, 0, -1, 1, 0]],
        level_of_measurement="ordinal",
        value_domain=[-1, 0, 1],
    )
    for tab in (overview, agreement):
        tab.evaluate("htmx.trigger(document.body, 'dashboard-refresh')")
    expect(agreement.locator("#overall-solutions")).to_have_text("2")
    expect(agreement.locator("#overall-krippendorff_alpha")).to_have_text(decimal(alpha))
    expect(agreement.locator(".total", has_text="Krippendorff")).to_contain_text("5 shared steps")
    for labeler in (ann, ben):
        expect(agreement.locator(f"#labeler-{labeler.id} th")).to_have_text(labeler.name)
    # Cohen's kappa of the two is 0: a "slight" cell, coloured by the stylesheet.
    pair = agreement.locator("#kappa-matrix td.kappa-slight").first
    expect(pair).to_have_text("0.00")
    expect(pair).to_have_css("background-color", "rgb(249, 211, 168)")
    expect(overview.locator("#agreement-alpha")).to_have_text(decimal(alpha))
    expect(overview.locator(".total", has_text="Agreement")).to_contain_text("5 shared steps")
    for tab in (overview, agreement):
        assert tab.evaluate("window.__marker") == "no reload"

    agreement.locator("#labelers").scroll_into_view_if_needed()
    ARTIFACTS.mkdir(exist_ok=True)
    agreement.screenshot(path=str(ARTIFACTS / "dashboard-agreement.png"), full_page=True)
