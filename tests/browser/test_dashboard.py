"""The admin dashboard in headless Chromium: htmx forms, their errors, and live figures."""

import base64
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import krippendorff
import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.admin.charts import Series, line_chart
from app.models import Generation, QueueState, Role, RunStatus, Solution, TrainingRun, User
from app.quality.questions import mark_quality_control
from app.templating import decimal
from tests.browser.conftest import TIMEOUT_MS
from tests.browser.live import ROOT, Labeler, LiveApp, SolutionSpec, add_labeler, queue
from tests.browser.pages import log_in, press, submit_login, task_swap, wait_for_task
from tests.factories import PASSWORD, make_label, make_solution, make_user, prm_run_metrics

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
    submit_login(page, name, PASSWORD)
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
    admin_page.get_by_label("Name", exact=True).fill(name)
    admin_page.get_by_role("button", name="Create", exact=True).click()
    result = admin_page.locator("#result")
    expect(result).to_contain_text(f"Created labeler {name}.")
    expect(result.locator(".password code")).to_have_text(re.compile(r"^[a-z0-9-]{19}$"))
    expect(admin_page.get_by_label("Name", exact=True)).to_have_value("")  # the form is ready again
    expect(admin_page.locator("#user-table")).to_contain_text(name)
    expect(admin_page).to_have_url(re.compile(r"/admin/users$"))
    with Session(live_app.engine) as session:
        assert session.scalar(select(User.is_approved).where(User.name == name)) is False

    admin_page.get_by_label("Name", exact=True).fill(name)
    admin_page.get_by_role("button", name="Create", exact=True).click()
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


def test_a_refused_upload_says_why_in_the_form(admin_page: Page) -> None:
    # The server's 413 (tests/test_security.py) as the browser gets it: the admin pages
    # swap only 2xx and 422 answers, so without a word in the form nothing would happen.
    refusal = "The request is too large: at most 1.0 MiB is accepted."
    admin_page.route(
        "**/admin/imports",
        lambda route: (
            route.fulfill(status=413, content_type="text/plain", body=refusal)
            if route.request.method == "POST"
            else route.continue_()
        ),
    )
    admin_page.goto("/admin/imports")
    admin_page.get_by_label("File").set_input_files(
        files=[{"name": "big.jsonl", "mimeType": "application/jsonl", "buffer": b"{}\n"}]
    )
    admin_page.get_by_role("button", name="Import").click()
    expect(admin_page.get_by_role("alert")).to_have_text(refusal)
    admin_page.unroute("**/admin/imports")
    admin_page.get_by_role("button", name="Import").click()  # now the server answers
    expect(admin_page.get_by_role("alert")).to_have_count(0)


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


def test_a_give_up_note_shows_in_the_notes_list_and_its_download(
    browser: Browser, admin_page: Page, live_app: LiveApp
) -> None:
    queue(live_app.engine, SolutionSpec(["Let $x = 2$.", "So $x^2 = 4$.\n\n# Answer\n\n4"]))
    labeler = add_labeler(live_app.engine, f"quitter-{uuid.uuid4().hex[:6]}")
    note = f"Step 2 squares without saying why ({uuid.uuid4().hex[:6]})."
    with labeling_page(browser, live_app, labeler) as page:
        wait_for_task(page, 2)
        page.get_by_role("button", name="Give up").click()
        dialog = page.locator("#task .reason-dialog")
        dialog.get_by_role("textbox").fill(note)
        with task_swap(page):
            dialog.get_by_role("button", name="Submit").click()

    admin_page.get_by_role("link", name="Notes").click()
    expect(admin_page).to_have_url(re.compile(r"/admin/notes$"))
    row = admin_page.locator("#note-table tbody tr").first  # newest first
    expect(row).to_contain_text(note)
    expect(row).to_contain_text(labeler.name)
    expect(row).to_contain_text("give up")
    admin_page.get_by_role("link", name="bad problem").click()
    expect(admin_page.locator("#note-table")).not_to_contain_text(note)
    with admin_page.expect_download() as download:
        admin_page.get_by_role("link", name="Download notes (JSONL)").click()
    lines = Path(download.value.path()).read_text().splitlines()
    mine = [json.loads(line) for line in lines if note in line]
    assert [(line["labeler"], line["finish_reason"]) for line in mine] == [
        (labeler.uuid, "give_up")
    ]


# Every admin page a labeler's work shows on, at the width the issue measured.
ADMIN_PAGES = (
    "/admin",
    "/admin/agreement",
    "/admin/agreement/items",
    "/admin/progress",
    "/admin/notes",
    "/admin/throughput",
    "/admin/qc",
    "/admin/users",
)
OUTSIDE_THE_BOX = """() => {
  const main = document.querySelector("main");
  const style = getComputedStyle(main);
  const left = main.getBoundingClientRect().left + parseFloat(style.paddingLeft);
  const right = main.getBoundingClientRect().right - parseFloat(style.paddingRight);
  const outside = [...main.querySelectorAll("table, svg")]
    .map(element => [element.id || element.className.baseVal || element.className,
                     element.getBoundingClientRect()])
    .filter(([, box]) => box.left < left - 0.5 || box.right > right + 0.5)
    .map(([name, box]) => `${name}: ${Math.round(box.left)}-${Math.round(box.right)}`);
  const page = document.documentElement;
  return {outside, sideways: page.scrollWidth - page.clientWidth, box: right - left};
}"""


def test_tables_stay_inside_their_box_at_1280_px(admin_page: Page, live_app: LiveApp) -> None:
    wide_agreement(live_app)
    admin_page.set_viewport_size({"width": 1280, "height": 900})
    for path in ADMIN_PAGES:
        admin_page.goto(path)
        measured = admin_page.evaluate(OUTSIDE_THE_BOX)
        assert measured["box"] == pytest.approx(1112, abs=1), path
        assert measured["outside"] == [], path
        assert measured["sideways"] == 0, path
    admin_page.goto("/admin/agreement")
    expect(admin_page.locator("#labelers td .verdict").first).to_have_text(
        re.compile(r"^\d of 3 answers$|^no gold yet$")
    )
    admin_page.locator("#labelers").scroll_into_view_if_needed()
    ARTIFACTS.mkdir(exist_ok=True)
    admin_page.screenshot(path=str(ARTIFACTS / "dashboard-agreement-1280.png"))


# Each chart text (axis labels, the last x label above all) whose box sticks out of its
# chart's box: the browser would clip it.
CLIPPED_CHART_TEXT = """() => [...document.querySelectorAll("main svg.chart-svg")].flatMap(svg => {
  const chart = svg.getBoundingClientRect();
  return [...svg.querySelectorAll("text")]
    .map(text => [text.textContent, text.getBoundingClientRect()])
    .filter(([, box]) => box.left < chart.left - 0.5 || box.right > chart.right + 0.5
                         || box.top < chart.top - 0.5 || box.bottom > chart.bottom + 0.5)
    .map(([text]) => text);
})"""


@pytest.mark.parametrize("width", [1280, 390])
def test_chart_labels_are_not_clipped(admin_page: Page, width: int) -> None:
    admin_page.set_viewport_size({"width": width, "height": 900})
    for path in ("/admin", *(f"/admin/throughput?window={key}" for key in ("24h", "7d", "30d"))):
        admin_page.goto(path)
        expect(admin_page.locator("main svg.chart-svg text").first).to_be_attached()
        assert admin_page.evaluate(CLIPPED_CHART_TEXT) == [], path


def wide_agreement(live_app: LiveApp) -> None:
    """Three labelers with long names on shared solutions, with QC answers: the agreement
    tables' widest content (every column filled, brackets and verdicts included)."""
    suffix = uuid.uuid4().hex[:6]
    with Session(live_app.engine) as session:
        root = make_user(session, f"gold-{suffix}", role=Role.ADMIN)
        names = ("annabelle", "bartholomew", "cornelius")
        labelers = [make_user(session, f"{name}-{suffix}") for name in names]
        for index in range(4):
            solution = make_solution(session, ["A.", "B.", "C."], generation=index % 2)
            for number, labeler in enumerate(labelers):
                ratings = [[1], [(index + number) % 3 - 1], [1]]
                finish = "found_error" if ratings[1] == [-1] else "solution"
                make_label(
                    session,
                    labeler,
                    solution,
                    ratings[:2] if finish == "found_error" else ratings,
                    finish_reason=finish,
                )
        gold = make_solution(session, ["A.", "B."], generation=1)
        session.flush()
        gold_label = make_label(session, root, gold, [[1], [1]])
        mark_quality_control(session, gold.id, gold_label.id)
        for labeler in labelers:
            make_label(session, labeler, gold, [[1], [-1]], finish_reason="found_error")
        session.commit()


def test_the_prm_pages_show_intervals_and_pin_a_checkpoint(
    admin_page: Page, live_app: LiveApp
) -> None:
    finished = {
        "status": RunStatus.SUCCEEDED.value,
        "started_at": datetime(2026, 5, 1, 9),
        "finished_at": datetime(2026, 5, 1, 9, 4),
        "labels_used": 180,
        "timings": {"grade": 0.4, "data": 1.2, "train": 42.5, "evaluate": 61.0, "compare": 58.3},
    }
    kept = prm_run_metrics(auroc=0.69)
    kept["evaluation"]["step_auroc"] = {"status": "not enough data: 3 held-out problems (needs 5)"}
    selecting = prm_run_metrics()
    selecting["selection"] = {
        "strategy": "convincing_wrong",
        "queued": 400,
        "yield": 0.775,
        "pool_wrong_share": 0.31,
        "reason": "generation 3 is 85% labeled",
    }
    with Session(live_app.engine) as session:
        session.execute(update(TrainingRun).values(is_current=False))
        pruned = TrainingRun(**finished, metrics=prm_run_metrics(0.66, current_auroc=None))
        current = TrainingRun(
            **finished,
            metrics=selecting,
            is_current=True,
            checkpoint_path="checkpoints/run-2",
            checkpoint_bytes=540_000_000,
        )
        newer = TrainingRun(
            **finished, metrics=kept, checkpoint_path="checkpoints/run-3", checkpoint_bytes=2_048
        )
        session.add_all([pruned, current, newer])
        session.flush()
        number = (session.scalar(select(func.max(Generation.number))) or 0) + 1
        session.add(Generation(number=number, run_id=current.id, selected=400, wrong_answers=310))
        session.commit()
        ids = pruned.id, current.id, newer.id

    admin_page.goto("/admin/prm")
    expect(admin_page.locator("#current-step-auroc .range")).to_have_text("[0.660, 0.750]")
    row = admin_page.locator(f"#run-{ids[2]}")
    expect(row).to_contain_text("not enough data: 3 held-out problems (needs 5)")
    expect(admin_page.locator(f"#run-{ids[0]}")).to_contain_text("pruned")
    generation = admin_page.locator(f"#generation-{number}")
    expect(generation).to_contain_text("77.5%")  # 310 wrong of 400
    expect(generation).to_contain_text("31.0%")  # the pool's share: a uniform pick's yield
    row.get_by_role("button", name=f"Pin run {ids[2]}'s checkpoint").click()
    expect(admin_page.locator("#result")).to_contain_text(f"Run {ids[2]}'s checkpoint is pinned")
    expect(row.locator(".badge")).to_have_text("pinned")  # the live block reloaded
    with Session(live_app.engine) as session:
        assert session.scalar(select(TrainingRun.pinned).where(TrainingRun.id == ids[2]))
    ARTIFACTS.mkdir(exist_ok=True)
    admin_page.screenshot(path=str(ARTIFACTS / "dashboard-prm.png"), full_page=True)

    admin_page.locator(f"#run-{ids[1]} a").first.click()
    expect(admin_page).to_have_url(re.compile(f"/admin/prm/runs/{ids[1]}$"))
    expect(admin_page.locator(".gate-reason")).to_contain_text(
        "promoted: step_auroc 0.712 [0.660, 0.750] against 0.700 [0.648, 0.738]"
    )
    arguments = len(prm_run_metrics()["training_args"])
    expect(admin_page.locator("#training-args tbody tr")).to_have_count(arguments)
    admin_page.screenshot(path=str(ARTIFACTS / "dashboard-prm-run.png"), full_page=True)


def test_the_control_share_is_drawn_from_the_pool_and_shown_on_the_prm_page(
    admin_page: Page, live_app: LiveApp
) -> None:
    """A generation queued as the worker queues one: the strategy's picks and a control
    share drawn uniformly from the same pool (worker/control.py); the PRM page shows both
    apart, and the step AUROC on the control labels of the PRM that scored the pool."""
    from worker.control import with_control
    from worker.repository import queue_generation
    from worker.select import Candidate, SelectionPlan

    with Session(live_app.engine) as session:
        run = TrainingRun(status=RunStatus.SUCCEEDED.value, labels_used=120)
        session.add(run)
        session.flush()
        pool = []
        for index in range(80):
            solution = make_solution(session, generation=None, queue_state=QueueState.NOT_QUEUED)
            # The PRM doubts the second step of every other solution, rightly.
            solution.prm_step_scores = [0.9, 0.2 if index % 2 else 0.8]
            solution.answer_correct = index % 2 == 0
            pool.append(solution)
        session.flush()
        candidates = [
            Candidate(s.id, s.problem_id, 0.9 * (s.prm_step_scores or [1, 1])[1], s.answer_correct)
            for s in pool
        ]
        plan = SelectionPlan(per_problem=1, max_size=80, seed=run.id)
        picks = with_control(candidates, plan, 0.25)
        correct = {c.solution_id: c.answer_correct for c in candidates}
        queued = queue_generation(session, run.id, picks.selected, picks.control, correct)
        assert queued is not None and len(queued.control) == 20
        run.metrics = {
            "selection": {"strategy": "convincing_wrong", "queued": len(picks)},
            "pool_scored_with": run.id,
        }
        labeler = make_user(session, f"control-{uuid.uuid4().hex[:6]}")
        by_id = {s.id: s for s in pool}
        for solution_id in [*queued.control, *queued.selected[:10]]:
            found = (by_id[solution_id].prm_step_scores or [])[1] < 0.5
            make_label(session, labeler, by_id[solution_id], [[1], [-1 if found else 1]])
        session.commit()
        number, run_id = queued.number, run.id
        found_on_control = sum((by_id[i].prm_step_scores or [])[1] < 0.5 for i in queued.control)

    admin_page.goto("/admin/prm")
    row = admin_page.locator(f"#generation-{number}")
    expect(row.locator(".control")).to_have_text("20")
    expect(row.locator(".control-labels")).to_have_text("20")
    expect(row.locator(".control-negatives")).to_contain_text(f"{found_on_control / 20:.1%}")
    expect(row.locator(".selected-labels")).to_have_text("10")
    # The PRM ranked every labeled step the way the labeler rated it.
    expect(row.locator(".control-auroc")).to_contain_text("1.000")
    expect(row.locator(".control-auroc")).to_contain_text(f"run {run_id}'s PRM")
    ARTIFACTS.mkdir(exist_ok=True)
    row.screenshot(path=str(ARTIFACTS / "dashboard-prm-control-share.png"))


def test_equal_lines_both_show_in_chromium(browser: Browser) -> None:
    equal = [0.5, 0.625, 0.625, 0.7]
    markup = line_chart(
        "Best of N per run",
        "Two series with the same values.",
        ["1", "2", "3", "4"],
        [Series("PRM pick", equal), Series("Majority vote", equal)],
        kind="share",
        y_max=1,
    )
    css = (ROOT / "static" / "css" / "app.css").read_text()
    page = browser.new_page(viewport={"width": 800, "height": 400})
    try:
        page.set_content(f"<style>{css}</style>{markup}")
        png = page.locator("svg.chart-svg").screenshot()
        # Pixels of each series' colour (static/css/app.css), counted in the browser.
        counts = page.evaluate(COUNT_COLOURS, [base64.b64encode(png).decode(), SERIES_RGB])
    finally:
        page.close()
    assert all(count > 100 for count in counts), counts


SERIES_RGB = [[11, 92, 173], [196, 67, 43]]
"""``series-0`` and ``series-1``."""
COUNT_COLOURS = """async ([png, colours]) => {
  const image = new Image();
  image.src = "data:image/png;base64," + png;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width;
  canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
  return colours.map(([r, g, b]) => {
    let count = 0;
    for (let i = 0; i < pixels.length; i += 4) {
      const [red, green, blue] = pixels.slice(i, i + 3);
      if (Math.abs(red - r) + Math.abs(green - g) + Math.abs(blue - b) < 60) count += 1;
    }
    return count;
  });
}"""
