"""The admin pages of a demo that has been labeled, in headless Chromium at 1280x900 and
390x844: every page the app serves fits the window, and what a new team tripped over
(issue 26) is gone.

The module's server gets the demo (``steplabel seed-demo``); its two labelers label the
shared head of the queue through the labeling service, phase-1 tasks with a step written, and
the worker's runs (one skipped, one trained for 30 epochs, one failed) and two imports
(one failed) are added as the worker and the upload would leave them.
"""

import json
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect
from sqlalchemy import Engine, exists, func, select
from sqlalchemy.orm import Session

from app.datasets.demo_seed import seed
from app.labeling import service
from app.labeling.submission import SubmissionInput
from app.models import (
    GoldLabel,
    ImportJob,
    JobStatus,
    Label,
    QueueState,
    RunStatus,
    Solution,
    TaskStyle,
    TrainingRun,
    User,
    utc_now,
)
from app.pool_shape import SHAPE_RULE
from tests.browser.live import ROOT, LiveApp
from tests.browser.pages import EACH_SIZE, SIZES, logged_in, settle
from tests.factories import login_of, make_label, make_user, prm_run_metrics

ARTIFACTS = ROOT / "test-artifacts" / "admin-pages"
TASKS_PER_LABELER = 8
"""Of the demo's shared head of 12: both labelers label these, phase-1 tasks among them."""
WRITTEN_STEP = "My own step: since $x + 1 = 3$, we get $x = 2$."
SKIPPED = "12 labels to train on (3 more on held-out problems); a run needs 50"
LONG_ERROR = (
    "demo-solutions.jsonl:1: unique_id: no problem has the unique_id "
    "'test/intermediate_algebra/a_rather_long_problem_identifier_of_the_data_set.json'; "
    "import the problems first"
)


@dataclass(frozen=True)
class Project:
    passwords: dict[str, str]
    ids: dict[str, list[int]]
    """Per path parameter of a page, the ids to show it with."""
    skipped_run: int
    trained_run: int
    phase1_solution: int
    failed_job: int


LONG_NAME = "y" * 120


@pytest.fixture(scope="module")
def project(live_app: LiveApp) -> Project:
    with Session(live_app.engine) as session:
        report = seed(session)
        session.commit()
    passwords = {name: password for name, _, password in report.passwords}
    for name in ("alice", "bob"):
        for number in range(TASKS_PER_LABELER):
            label_next_task(
                live_app.engine,
                name,
                careful=name == "alice",
                give_up=name == "bob" and number == 5,
            )
    with Session(live_app.engine) as session:
        runs = add_runs(session)
        jobs = add_import_jobs(session)
        answer = answer_a_question(session, "alice")
        # The longest name the users form takes: no page may grow wider for it.
        make_user(session, LONG_NAME, approved=False)
        phase1 = session.scalars(
            select(Solution.id)
            .where(Solution.style == TaskStyle.PHASE1.value, Solution.completed_count == 2)
            .order_by(Solution.id)
        ).first()
        assert phase1 is not None, "both labelers labeled a phase-1 task"
        labeled = session.scalars(select(Label.solution_id).where(Label.solution_id.is_not(None)))
        problems = session.scalars(
            select(Solution.problem_id).where(Solution.id.in_(labeled.all())).distinct()
        ).all()
        session.commit()
    return Project(
        passwords=passwords,
        ids={
            "run_id": list(runs.values()),
            "solution_id": [phase1],
            "problem_id": sorted(problems)[:2],
            "label_id": [answer],
        },
        skipped_run=runs["skipped"],
        trained_run=runs["trained"],
        phase1_solution=phase1,
        failed_job=jobs["failed"],
    )


@dataclass
class Browsing:
    """A logged-in page, and the resources it failed to load."""

    page: Page
    failed: list[str]


def label_next_task(engine: Engine, name: str, *, careful: bool, give_up: bool) -> None:
    """Label the user's next task through the labeling service, as the page's submit does
    (the page itself is tested in test_labeling_page.py; a page per task here was a seventh
    of the module's time, BENCHMARKS): a careful labeler rates every step positive and
    writes the second step of a phase-1 task; the other rates the second step neutral and
    the third negative, and takes the first candidate each time."""
    with Session(engine) as session:
        login = login_of(session.scalars(select(User).where(User.name == name)).one())
    with engine.begin() as connection:
        _, lease = service.next_lease(connection, login, utc_now())
        assert lease is not None, f"{name} has no task"
        task = service.task_view(connection, lease)
    phase1 = task.style == TaskStyle.PHASE1.value
    body = _give_up() if give_up else _ratings(task, phase1=phase1, careful=careful)
    with engine.begin() as connection:
        saved = service.submit_label(
            connection, login, task.assignment_id, SubmissionInput.model_validate(body), utc_now()
        )
    assert saved.created


def _ratings(task: service.TaskView, *, phase1: bool, careful: bool) -> dict[str, Any]:
    """The ratings as the page would send them; a step's alternatives are the page's other
    candidates (phase 1) or the ways to write a step rated negative."""
    rated: list[dict[str, Any]] = []
    finish = "solution"
    for index, others in enumerate(map(len, task.alternatives)):
        if phase1:
            if careful and index == 1:
                rated.append(
                    {"rating": -1, "alternative_ratings": [-1] * others, "human_text": WRITTEN_STEP}
                )
            else:
                rated.append({"rating": 1, "alternative_ratings": [1] * others, "chosen": 0})
            continue
        rating = 1 if careful or index < 1 else (0 if index == 1 else -1)
        rated.append(
            {"rating": rating, "alternative_ratings": [1] * others if rating == -1 else []}
        )
        if rating == -1:
            finish = "found_error"
            break
    return {"steps": rated, "finish_reason": finish, "total_time": 95_000}


def _give_up() -> dict[str, Any]:
    return {
        "steps": [],
        "finish_reason": "give_up",
        "total_time": 30_000,
        "note": "The third step divides by a number the problem never says is nonzero, "
        "and I could not decide whether that is allowed here: " + "x" * 80,
    }


def add_runs(session: Session) -> dict[str, int]:
    """A run skipped for too few labels, one trained for 30 epochs (the current PRM), and
    one that failed, as the worker leaves them."""
    started, finished = datetime(2026, 11, 26, 9), datetime(2026, 11, 26, 9, 3)
    trained = prm_run_metrics()
    trained["train"]["epochs"] = 30
    trained["train"]["epoch_losses"] = [round(0.95 - 0.025 * n, 4) for n in range(30)]
    runs = {
        "skipped": TrainingRun(
            status=RunStatus.SUCCEEDED.value,
            started_at=started,
            finished_at=started,
            labels_used=12,
            metrics={"graded": 3, "examples": 40, "labels": 15, "skipped": SKIPPED},
        ),
        "trained": TrainingRun(
            status=RunStatus.SUCCEEDED.value,
            started_at=started,
            finished_at=finished,
            labels_used=180,
            metrics=trained,
            is_current=True,
            checkpoint_path="checkpoints/run-2-a-long-directory-name-for-the-checkpoint",
            checkpoint_bytes=540_000_000,
        ),
        "failed": TrainingRun(
            status=RunStatus.FAILED.value,
            started_at=started,
            finished_at=finished,
            error='Traceback (most recent call last):\n  File "worker/cycle.py", line 180\n'
            "RuntimeError: " + "the model could not be prepared " * 6,
        ),
    }
    session.add_all(runs.values())
    session.flush()
    return {key: run.id for key, run in runs.items()}


def add_import_jobs(session: Session) -> dict[str, int]:
    """A failed upload and one that skipped a bad line, as the import thread leaves them."""
    admin = session.scalars(select(User.id).where(User.name == "admin")).one()
    jobs = {
        "failed": ImportJob(
            status=JobStatus.FAILED.value,
            kind="solutions",
            filename="demo-solutions-with-a-long-name.jsonl",
            created_by_id=admin,
            lines_total=3,
            lines_done=3,
            error=LONG_ERROR,
        ),
        "succeeded": ImportJob(
            status=JobStatus.SUCCEEDED.value,
            kind="prm800k",
            filename="labels.jsonl",
            created_by_id=admin,
            skip_invalid=True,
            lines_total=2,
            lines_done=2,
            summary="1 labels imported, 1 line skipped",
            skipped=[LONG_ERROR.replace(":1:", ":2:")],
        ),
    }
    session.add_all(jobs.values())
    session.flush()
    return {key: job.id for key, job in jobs.items()}


def answer_a_question(session: Session, name: str) -> int:
    """The labeler's answer to a demo quality-control question: its label id."""
    user = session.scalars(select(User).where(User.name == name)).one()
    solution = session.scalars(
        select(Solution).join(GoldLabel, GoldLabel.solution_id == Solution.id).limit(1)
    ).one()
    steps = solution.steps or []
    ratings: list[list[int | None]] = [[1] for _ in steps]
    return make_label(session, user, solution, ratings, quality_control=True).id


# Every page, filled in from the app's own list of routes.


def html_pages(admin: Page, project: Project) -> list[str]:
    """Every page the app serves as HTML (its OpenAPI schema's GET operations answering
    text/html), each path parameter filled with the project's ids for it."""
    schema = admin.request.get("/openapi.json").json()
    pages = []
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None or "text/html" not in get["responses"].get("200", {}).get("content", {}):
            continue
        parameters = re.findall(r"{(\w+)}", path)
        missing = [name for name in parameters if name not in project.ids]
        assert not missing, f"{path}: say which ids to show it with, in project.ids"
        if not parameters:
            pages.append(path)
            continue
        [name] = parameters
        pages += [path.replace(f"{{{name}}}", str(value)) for value in project.ids[name]]
    return pages


# What sticks out past the window's right edge: the page itself (it scrolls sideways); a
# sentence (a caption, a heading, a paragraph, a list item, a label) that a table scrolling
# in its own box would cut, outside the table's cells; and, on a labeler's page, any table.
# An admin's table of figures may scroll in its box on a phone; what a page says may not.
OUTSIDE_THE_WINDOW = """tables => {
  const width = document.documentElement.clientWidth;
  const shown = element => element.getClientRects().length > 0;
  const right = element => Math.round(element.getBoundingClientRect().right);
  const prose = "caption, h1, h2, h3, p, li, dt, dd, label, legend, summary, pre, figcaption";
  const cut = [...document.querySelectorAll(prose)]
    .filter(element => shown(element) && !element.closest("td, tbody th"))
    .filter(element => right(element) > width)
    .map(element => `${element.tagName}: ${element.textContent.trim().slice(0, 40)}`);
  const wide = tables ? [...document.querySelectorAll("main table")]
    .filter(table => shown(table) && (table.scrollWidth > width || right(table) > width))
    .map(table => `table ${table.id || table.className}: ${table.scrollWidth} px`) : [];
  return {sideways: document.documentElement.scrollWidth - width, cut: [...cut, ...wide]};
}"""


def visit(page: Page, path: str) -> dict[str, Any]:
    """What of the page at ``path`` sticks out of the window (nothing: an empty dict)."""
    response = page.goto(path)
    assert response is not None and response.ok, path
    settle(page)
    measured: dict[str, Any] = page.evaluate(OUTSIDE_THE_WINDOW, not path.startswith("/admin"))
    return measured if measured["sideways"] > 0 or measured["cut"] else {}


def failed_loads(page: Page) -> list[str]:
    """The console's reports of resources that failed to load, from now on."""
    failed: list[str] = []

    def keep(message: ConsoleMessage) -> None:
        if message.type == "error" and "Failed to load resource" in message.text:
            failed.append(f"{page.url}: {message.text}")

    page.on("console", keep)
    return failed


@pytest.mark.parametrize("size", EACH_SIZE)
def test_no_page_is_wider_than_the_window(
    browser: Browser, live_app: LiveApp, project: Project, size: tuple[int, int]
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    wide: dict[str, dict[str, Any]] = {}
    with (
        logged_in(browser, live_app, "admin", size, password=project.passwords["admin"]) as admin,
        logged_in(browser, live_app, "alice", size, password=project.passwords["alice"]) as alice,
    ):
        failed = failed_loads(admin) + failed_loads(alice)
        pages = html_pages(admin, project)
        assert "/admin/prm/runs/{run_id}".replace("{run_id}", str(project.trained_run)) in pages
        for path in pages:
            # A labeler's pages as a labeler sees them; the login page as a stranger.
            viewer = admin if path.startswith("/admin") else alice
            if path == "/login":
                continue  # a stranger's page: below
            if measured := visit(viewer, path):
                wide[path] = measured
                # The picture of what sticks out, for whoever reads the failure.
                name = re.sub(r"\W+", "-", path.strip("/")) or "home"
                viewer.screenshot(path=ARTIFACTS / f"{name}-{size[0]}.png", full_page=True)
        alice.context.clear_cookies()
        if measured := visit(alice, "/login"):
            wide["/login"] = measured
        # Loading each page failed to load nothing (a page's own icon included).
        errors = list(failed)
    assert wide == {}
    assert errors == []


@pytest.fixture(params=EACH_SIZE)
def admin(
    browser: Browser, live_app: LiveApp, project: Project, request: pytest.FixtureRequest
) -> Iterator[Page]:
    """The demo admin, logged in, at each size."""
    with logged_in(
        browser, live_app, "admin", request.param, password=project.passwords["admin"]
    ) as page:
        yield page


def width(page: Page) -> int:
    size = page.viewport_size
    assert size is not None
    return size["width"]


def test_favicon_is_served_and_linked(admin: Page) -> None:
    response = admin.request.get("/favicon.ico")
    assert response.ok and response.headers["content-type"].startswith("image/")
    for path in ("/admin", "/label/next", "/login"):
        admin.goto(path)
        icon = admin.locator("link[rel=icon]").get_attribute("href")
        assert icon is not None and admin.request.get(icon).ok, path


def test_the_drill_down_shows_whose_rating_is_whose(admin: Page, project: Project) -> None:
    admin.goto(f"/admin/agreement/items/{project.phase1_solution}")
    table = admin.get_by_role("table", name=re.compile("Each labeler's rating"))
    header = table.locator("thead tr").first
    expect(header.locator("th")).to_contain_text(["Step", "Text", "alice", "bob"])
    first_row = table.locator("tbody tr").first
    header_box, row_box = header.bounding_box(), first_row.bounding_box()
    assert header_box is not None and row_box is not None
    assert header_box["y"] + header_box["height"] <= row_box["y"] + 0.5, "the header is above"
    # Each column's title stands over its column: alice's over alice's ratings.
    titles, cells = header.locator("th"), first_row.locator("th, td")
    for column in range(titles.count()):
        title, cell = titles.nth(column).bounding_box(), cells.nth(column).bounding_box()
        assert title is not None and cell is not None
        assert abs(title["x"] - cell["x"]) <= 1 and abs(title["width"] - cell["width"]) <= 1
    # The step alice wrote herself (phase 1), typeset, where her label is described.
    written = admin.locator("section.label-notes", has_text="alice")
    expect(written).to_contain_text("Step 2, written by alice")
    expect(written.locator(".written .katex").first).to_be_visible()
    expect(written.locator(".written")).to_contain_text("My own step")
    marked = first_row.locator("xpath=following-sibling::tr[1]").locator("td").nth(1)  # alice
    expect(marked.get_by_label("wrote the step")).to_be_visible()


def run_row(page: Page, run_id: int) -> Any:
    """The row of a runs table that links to the run."""
    link = page.get_by_role("link", name=str(run_id), exact=True)
    return page.locator("main table tbody tr", has=link).first


def test_a_skipped_run_shows_as_skipped_with_its_reason(admin: Page, project: Project) -> None:
    for path in ("/admin", "/admin/prm"):
        admin.goto(path)
        row = run_row(admin, project.skipped_run)
        expect(row.locator("td").nth(1)).to_contain_text("skipped")
        expect(row).not_to_contain_text("succeeded")
        expect(row).to_contain_text(SKIPPED)
    admin.goto(f"/admin/prm/runs/{project.skipped_run}")
    status = admin.locator(".run-facts dt", has_text="Status").locator(
        "xpath=following-sibling::dd[1]"
    )
    expect(status).to_have_text("skipped")
    expect(admin.locator("main")).to_contain_text(SKIPPED)


def test_the_loss_per_epoch_is_a_chart(admin: Page, project: Project) -> None:
    admin.goto(f"/admin/prm/runs/{project.trained_run}")
    chart = admin.get_by_role("img", name=re.compile("^Loss per epoch"))
    expect(chart).to_be_visible()
    row = admin.locator("#training-stats tr", has_text="Loss per epoch")
    expect(row.locator("td")).to_have_text("0.9500 → 0.2250 in 30 epochs")
    box = chart.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width(admin)
    assert admin.evaluate("document.documentElement.scrollWidth") <= width(admin)


def test_an_import_that_failed_says_why_on_screen(admin: Page, project: Project) -> None:
    admin.goto("/admin/imports")
    row = admin.locator(f"#job-{project.failed_job}")
    error = row.locator(".import-error")
    expect(error).to_have_text(LONG_ERROR)
    box = error.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width(admin)
    expect(row.locator("progress")).to_have_count(0)  # it did not import its lines
    expect(row).to_contain_text("failed")

    # One line is one line, and each kind of file has an example line.
    admin.get_by_label("File").set_input_files(
        files=[{"name": "one.jsonl", "mimeType": "application/jsonl", "buffer": b"{}\n"}]
    )
    admin.get_by_role("button", name="Import").click()
    expect(admin.locator("#result")).to_contain_text("Received one.jsonl (1 line):")
    admin.get_by_text("A line of each kind").click()
    examples = admin.locator(".import-example code")
    expect(examples).to_have_count(3)
    for index in range(3):
        expect(examples.nth(index)).to_be_visible()
        box = examples.nth(index).bounding_box()
        assert box is not None and box["x"] + box["width"] <= width(admin)
        assert json.loads(examples.nth(index).inner_text())


def test_throughput_writes_its_numbers_one_way(admin: Page) -> None:
    for window in ("24h", "7d"):
        admin.goto(f"/admin/throughput?window={window}")
        texts = [admin.locator("main").inner_text()]
        texts += admin.locator("main svg").evaluate_all(
            "svgs => svgs.map(svg => svg.getAttribute('aria-label') || svg.textContent)"
        )
        decimals = re.findall(r"\d[\d,]*\.\d+", " ".join(texts))
        assert decimals, "labels per working hour"
        assert [n for n in decimals if not re.fullmatch(r"\d{1,3}(,\d{3})*\.\d+", n)] == []


def test_the_data_page_has_a_heading_and_wraps_sources_between_parts(admin: Page) -> None:
    admin.goto("/admin/data")
    expect(admin.locator("main h1").first).to_have_text("Data")
    first_heading = admin.locator("main h1").first.bounding_box()
    totals = admin.locator("main .totals").bounding_box()
    assert first_heading is not None and totals is not None
    assert first_heading["y"] < totals["y"]
    parts = admin.locator("main .source .part")
    if width(admin) > 640:  # a phone leaves the column out
        expect(parts.first).to_be_visible()
    # Each part of a path (demo/, algebra/, 86032.json) stays on one line.
    split = parts.evaluate_all("parts => parts.filter(p => p.getClientRects().length > 1).length")
    assert split == 0


def test_an_admin_is_told_that_labeling_takes_a_task(
    admin: Page, browser: Browser, live_app: LiveApp, project: Project
) -> None:
    link = admin.get_by_role("navigation", name="Main").get_by_role("link", name="Label")
    expect(link).to_have_attribute("title", re.compile("holds the next task for 30 minutes"))
    admin.goto("/label/next")
    notice = admin.locator(".lease-notice")
    expect(notice).to_contain_text("You hold this task for 30 minutes")
    expect(notice).to_contain_text("What you submit fills one of its slots")
    with logged_in(
        browser, live_app, "alice", SIZES["390x844"], password=project.passwords["alice"]
    ) as alice:
        alice.goto("/label/next")
        expect(alice.locator("#task")).to_be_visible()
        expect(alice.locator(".lease-notice")).to_have_count(0)


def test_the_audit_log_lists_an_admins_change_and_filters_it(admin: Page) -> None:
    """The admin ends bob's sessions on the Users page, then finds it in the audit log,
    filtered by action and admin, with the session counter before and after."""
    admin.goto("/admin/users")
    admin.on("dialog", lambda dialog: dialog.accept())  # hx-confirm asks first
    row = admin.locator("tr").filter(has_text=re.compile(r"\bbob\b"))
    row.get_by_role("button", name="End sessions").click()
    expect(admin.locator("#result")).to_contain_text("bob is logged out everywhere")

    admin.get_by_role("navigation", name="Admin").get_by_role("link", name="Audit log").click()
    expect(admin.get_by_role("heading", name="Audit log")).to_be_visible()
    admin.get_by_label("Action").select_option("user.end_sessions")
    admin.get_by_label("By admin").select_option("admin")
    admin.get_by_label("Target contains").fill("bob")
    admin.get_by_role("button", name="Filter").click()
    expect(admin).to_have_url(re.compile(r"/admin/audit\?action=user.end_sessions&actor=admin"))
    rows = admin.locator("table.audit tbody tr")
    expect(rows.first).to_contain_text("user.end_sessions")
    expect(rows.first).to_contain_text("user bob")
    expect(rows.first).to_contain_text('"session_version"')
    for text in rows.all_inner_texts():
        assert "user.end_sessions" in text and "user bob" in text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    admin.screenshot(path=ARTIFACTS / f"audit-{width(admin)}.png", full_page=True)

    admin.get_by_label("Action").select_option("qc.gold")
    admin.get_by_role("button", name="Filter").click()
    expect(admin.get_by_text("No entry matches these filters.")).to_be_visible()


# Key columns on a phone: no admin table hides columns past the window's edge.
TABLES_PAST_THE_EDGE = """() => {
  const width = document.documentElement.clientWidth;
  const shown = element => element.getClientRects().length > 0;
  // A header row kept for screen readers only, where rows stack as cards.
  const hiddenHead = cell => cell.closest("thead")?.getBoundingClientRect().width <= 1;
  return [...document.querySelectorAll("main table:not([data-no-cards])")]
    .filter(table => shown(table))
    .filter(table => table.scrollWidth > table.clientWidth + 1
      || Math.round(table.getBoundingClientRect().right) > width
      || [...table.querySelectorAll("th, td")].some(
        cell => shown(cell) && !hiddenHead(cell)
          && Math.round(cell.getBoundingClientRect().right) > width))
    .map(table => table.id || table.querySelector("caption")?.textContent.trim().slice(0, 50)
      || table.className);
}"""


# The phone width on SQLite alone, as EACH_SIZE's phone cell (tests/browser/pages.py): the
# server never learns the window's size, so Postgres's pages would lay out the same.
@pytest.mark.sqlite_only
def test_no_admin_table_hides_columns_past_the_edge_of_a_phone(
    browser: Browser, live_app: LiveApp, project: Project
) -> None:
    """At 390 px the drill-down's Score, Steps disagreed and First error columns (and ten
    other tables' columns) sat past the window's edge, to be scrolled to with no hint:
    tables stack their rows as cards there, each cell named by its column (a matrix, marked
    data-no-cards, reads both ways and scrolls in its box)."""
    hidden: dict[str, list[str]] = {}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with logged_in(
        browser, live_app, "admin", SIZES["390x844"], password=project.passwords["admin"]
    ) as admin:
        for path in html_pages(admin, project):
            if not path.startswith("/admin"):
                continue
            response = admin.goto(path)
            assert response is not None and response.ok, path
            settle(admin)
            if tables := admin.evaluate(TABLES_PAST_THE_EDGE):
                hidden[path] = tables
                name = re.sub(r"\W+", "-", path.strip("/"))
                admin.screenshot(path=ARTIFACTS / f"past-the-edge-{name}.png", full_page=True)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "tables-past-the-edge.json").write_text(json.dumps(hidden, indent=1))
        assert hidden == {}
        # A stacked cell says which column it is.
        admin.goto("/admin/agreement/items")
        cell = admin.locator("table.data tbody tr").first.locator("td").nth(3)
        label = cell.evaluate("cell => getComputedStyle(cell, '::before').content")
        assert label == '"Score"'


def test_short_names_stay_whole_in_the_users_table(
    browser: Browser, live_app: LiveApp, project: Project
) -> None:
    """Beside the wide Actions column and a 120-letter name, "admin" broke as "admi/n" at
    1280 px: a row's name may wrap anywhere, so its column shrank to a letter."""
    with logged_in(
        browser, live_app, "admin", SIZES["1280x900"], password=project.passwords["admin"]
    ) as admin:
        admin.goto("/admin/users")
        # As a project without this module's 120-letter name has it: that name's width
        # gave its column room that a table of short names does not get.
        admin.evaluate(
            """() => document.querySelectorAll("#user-table tbody th[scope=row]").forEach(
                cell => { if (cell.textContent.trim().length > 20) cell.textContent = "chris"; })"""
        )
        lines = admin.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll(
                "#user-table tbody th[scope=row], #user-table tbody td:nth-child(2)")]
                .map(cell => {
                const range = document.createRange();
                range.selectNodeContents(cell);
                const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                return [cell.tagName + " " + cell.textContent.trim().slice(0, 12), tops.size];
            }))"""
        )
        admin.screenshot(path=ARTIFACTS / "users-1280.png", full_page=True)
    assert {name: count for name, count in lines.items() if len(name) <= 12} == {
        "TH admin": 1,
        "TH alice": 1,
        "TH bob": 1,
        "TH chris": 1,
        "TD labeler": 1,
        "TD admin": 1,
    }


def test_the_prm_page_names_the_rule_that_chose_the_strategy(
    admin: Page, live_app: LiveApp
) -> None:
    # The pool's shape, counted here from the tables: unlabeled, unqueued solutions per problem.
    with Session(live_app.engine) as session:
        unlabeled = (
            select(Solution.problem_id, func.count().label("left"))
            .where(
                Solution.queue_state == QueueState.NOT_QUEUED.value,
                Solution.steps.is_not(None),
                ~exists().where(Label.solution_id == Solution.id),
            )
            .group_by(Solution.problem_id)
            .subquery()
        )
        lefts = sorted(session.scalars(select(unlabeled.c.left)))
    assert lefts, "the demo leaves an unlabeled pool"
    median = statistics.median(lefts)
    measured_at, strategy, source = next(
        (n, s, why) for low, n, s, why in SHAPE_RULE if median >= low
    )
    admin.goto("/admin/prm")
    said = admin.locator("#selection-strategy")
    expect(said.locator("strong")).to_have_text(strategy)
    rule = said.locator("#selection-rule")
    expect(rule).to_contain_text(f"your pool has {median:g} unlabeled")
    expect(rule).to_contain_text(
        f"the shape of {measured_at} per problem in BENCHMARKS.md: {strategy}, {source}"
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    said.screenshot(path=ARTIFACTS / f"prm-rule-{width(admin)}.png")
