"""Screenshots of the labeling page and the admin pages for README.md, at 1280x900 and
390x844, taken from a live demo server on a fresh SQLite database.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots]

It migrates and seeds the demo (``steplabel seed-demo``), serves it with uvicorn and
``make run``'s demo settings (scripts/run.sh), has both demo labelers label the shared head
of the queue through the labeling API (a few tasks given up on or reported as bad problems,
with notes), runs the PRM worker once on their labels with the tiny test model (a run's
page, in a minute or two), and saves each page as a PNG with a palette, which keeps the
committed files small. Needs Chromium at /usr/bin/chromium.
"""

import argparse
import io
import os
import random
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from PIL import Image
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
TASKS_PER_LABELER = 10
"""The demo's first 12 solutions go to both labelers: 10 each make agreement figures."""
PALETTE_COLOURS = 64
NOTES = {
    "give_up": "Step 4 leans on a figure the problem does not give; I cannot check it.",
    "bad_problem": "The reference answer disagrees with the problem statement (3 vs 4 roots).",
}


@dataclass(frozen=True)
class Shot:
    """A page to photograph at every size in WIDTHS: who looks at it, and where."""

    name: str
    user: str
    path: str
    keys: str = ""
    """Keys pressed on the page before the picture."""
    follow: str = ""
    """Where the first link that matches this CSS selector on ``path`` leads, instead."""
    scroll: str = ""
    """The part of the page (a CSS selector) scrolled to the top of the picture."""


SHOTS = (
    Shot("labeling", "alice", "/label/next", keys="33"),
    Shot("my-work", "alice", "/me"),
    Shot("admin-overview", "admin", "/admin"),
    Shot("admin-agreement", "admin", "/admin/agreement"),
    Shot(
        "admin-disagreement",
        "admin",
        "/admin/agreement/items",
        follow="#item-table a[href^='/admin/agreement/items/']",
    ),
    Shot("admin-notes", "admin", "/admin/notes"),
    Shot("admin-throughput", "admin", "/admin/throughput"),
    Shot("admin-qc", "admin", "/admin/qc"),
    Shot(
        "admin-prm-run",
        "admin",
        "/admin/prm",
        follow=".runs a[href^='/admin/prm/runs/']",
        scroll="#training-stats",
    ),
)
PHASE1_SHOT = Shot("labeling-phase1", "alice", "/label/next", keys="3333")
"""Taken while alice labels, at her first phase-1 task: its candidates, the first rated."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    out: Path = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as workdir,
        demo_server(Path(workdir)) as (url, passwords),
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for labeler in ("alice", "bob"):
            with logged_in(browser, url, labeler, passwords[labeler], "desktop") as page:
                label_tasks(page, random.Random(labeler), out if labeler == "alice" else None)
        train_once(Path(workdir))
        for shot in SHOTS:
            for size in WIDTHS:
                with logged_in(browser, url, shot.user, passwords[shot.user], size) as page:
                    save(page, shot, out / f"{shot.name}-{size}.png")
        browser.close()


def demo_settings() -> dict[str, str]:
    """The settings ``make run`` gives the demo: scripts/run.sh's defaults."""
    script = (ROOT / "scripts" / "run.sh").read_text()
    return dict(re.findall(r'export (STEPLABEL_\w+)="\$\{\1:-([^}]*)\}"', script))


def demo_environment(workdir: Path) -> dict[str, str]:
    """The environment of the demo's processes: its settings, its database in ``workdir``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("STEPLABEL_")}
    return (
        env
        | demo_settings()
        | {
            "STEPLABEL_DATABASE_URL": f"sqlite:///{workdir / 'demo.db'}",
            "PYTHONPATH": str(ROOT),
        }
    )


@contextmanager
def demo_server(workdir: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """The seeded demo served on a free port: its URL and the demo users' passwords."""
    env = demo_environment(workdir)
    env |= {
        "STEPLABEL_SECRET_KEY": secrets.token_urlsafe(48),
        # No quality-control questions among the tasks: both labelers get the shared head.
        "STEPLABEL_QC_RATE": "0",
    }
    credentials = workdir / "credentials.txt"
    for command in (["migrate"], ["seed-demo", "--credentials", str(credentials)]):
        subprocess.run(
            [str(BIN / "steplabel"), *command],
            env=env,
            cwd=workdir,
            check=True,
            capture_output=True,
        )
    # The credentials file: a header, then one "name<TAB>role<TAB>password" line per user.
    rows = [line.split("\t") for line in credentials.read_text().splitlines()[1:]]
    passwords = {name: password for name, _, password in rows}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(BIN / "uvicorn"), "app.main:app", "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen(command, env=env, cwd=workdir)
    try:
        wait_until_healthy(url)
        yield url, passwords
    finally:
        server.terminate()
        server.wait(timeout=10)


def train_once(workdir: Path) -> None:
    """One run of the PRM worker on the labels so far: the tiny test model (no download),
    trained for a few epochs even on these few labels, its checkpoint in ``workdir``."""
    env = demo_environment(workdir) | {
        "STEPLABEL_PRM_BASE_MODEL": "tiny",
        "STEPLABEL_TRAIN_MIN_LABELS": "10",
        "STEPLABEL_TRAIN_EPOCHS": "8",
        "STEPLABEL_CHECKPOINT_DIR": str(workdir / "checkpoints"),
    }
    command = [str(BIN / "python"), "-m", "worker", "once"]
    subprocess.run(command, env=env, cwd=workdir, check=True, capture_output=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_healthy(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)  # a server starting up has nothing to wait on but polling
    raise RuntimeError(f"the demo server did not answer {url}/healthz in {timeout_s:.0f} s")


@contextmanager
def logged_in(browser: Browser, url: str, name: str, password: str, size: str) -> Iterator[Page]:
    """A fresh browser context of ``size`` in which ``name`` has logged in."""
    width, height = WIDTHS[size]
    context: BrowserContext = browser.new_context(
        base_url=url, viewport={"width": width, "height": height}
    )
    try:
        page = context.new_page()
        page.goto("/login")
        page.get_by_label("Name").fill(name)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(lambda address: "/login" not in address)
        yield page
    finally:
        context.close()


def label_tasks(page: Page, rng: random.Random, phase1_out: Path | None) -> None:
    """Label the labeler's next tasks through the API the labeling page uses; with
    ``phase1_out``, photograph the first phase-1 task there at every size first."""
    for number in range(TASKS_PER_LABELER):
        page.goto("/label/next")
        task = page.locator("#task")
        if task.count() == 0:
            return
        if phase1_out is not None and task.get_attribute("data-style") == "phase1":
            # The keys once: the page keeps its draft, and shows it again at the next size.
            shot = PHASE1_SHOT
            for size, (width, height) in WIDTHS.items():
                page.set_viewport_size({"width": width, "height": height})
                save(page, shot, phase1_out / f"{shot.name}-{size}.png")
                shot = replace(shot, keys="")
            phase1_out = None
        submit_url = task.get_attribute("data-submit-url")
        token = page.locator('meta[name="csrf-token"]').get_attribute("content")
        body = submission(page, number, rng)
        response = page.request.post(
            str(submit_url), data=body, headers={"X-CSRF-Token": str(token)}
        )
        if not response.ok:
            raise RuntimeError(f"{submit_url} answered {response.status}: {response.text()}")


def submission(page: Page, number: int, rng: random.Random) -> dict[str, object]:
    """A label for the open task: every few tasks a give-up or a bad problem with a note,
    phase-1 tasks given up on, else steps rated positive up to an error now and then."""
    total_time = rng.randint(40_000, 180_000)
    reason = {3: "give_up", 7: "bad_problem"}.get(number)
    if reason is None and page.locator("#task").get_attribute("data-style") == "phase1":
        reason = "give_up"
    if reason is not None:
        return {
            "steps": [],
            "finish_reason": reason,
            "total_time": total_time,
            "note": NOTES[reason],
        }
    steps = page.locator("#task li.step")
    count = steps.count()
    error_at = rng.randrange(count) if rng.random() < 0.5 else None
    rated = []
    for index in range(count if error_at is None else error_at + 1):
        if index == error_at:
            alternatives = steps.nth(index).locator("li.alternative").count()
            rated.append(
                {
                    "rating": -1,
                    "alternative_ratings": [rng.choice((-1, 0, 1)) for _ in range(alternatives)],
                }
            )
        else:
            rated.append({"rating": rng.choice((1, 1, 1, 0))})
    finish = "solution" if error_at is None else "found_error"
    return {"steps": rated, "finish_reason": finish, "total_time": total_time}


def save(page: Page, shot: Shot, target: Path) -> None:
    """The page's viewport as a palette PNG, once KaTeX and htmx have settled."""
    page.goto(shot.path)
    if shot.follow:
        page.goto(str(page.locator(shot.follow).first.get_attribute("href")))
    page.wait_for_load_state("networkidle")
    if shot.scroll:
        page.locator(shot.scroll).first.evaluate("part => part.scrollIntoView()")
    for key in shot.keys:
        page.keyboard.press(key)
    picture = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    picture.quantize(colors=PALETTE_COLOURS).save(target, optimize=True)
    print(f"{target}: {target.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
