"""/me over HTTP: a labeler's history, time, agreement with others and quality-control
answers, the answer key shown after the fact, and nothing of anyone else's."""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.admin.agreement.views import agreement_report
from app.labeling.history import PAGE_SIZE, my_history, my_work
from app.main import create_app
from app.models import SCREENING_GENERATION, Role
from app.quality.questions import mark_quality_control, unmark_quality_control
from tests.factories import make_rated_label, make_solution, make_user
from tests.web import csrf_from, log_in

STEPS = ["Let $x = 2$.", "Then $x^2 = 4$.", "So it is $5$.\n\n# Answer\n\n5"]
CAROLS_PROBLEM = "What is Carol's own number?"


@dataclass(frozen=True)
class World:
    shared_label: int
    """Alice's label of a solution Bob labeled too."""
    alices_answer: int
    """Alice's answer to a quality-control question."""
    bobs_answer: int
    unanswered_gold: int
    """The gold label of a question Alice has not answered."""


@pytest.fixture
def world(engine: Engine) -> World:
    """Alice and Bob (and an admin) label one solution each and answer a QC question; Carol
    labels her own problem; a second QC question waits for Alice."""
    with Session(engine) as session:
        alice, bob, carol = (make_user(session, name) for name in ("alice", "bob", "carol"))
        admin = make_user(session, "admin", role=Role.ADMIN)
        shared = make_solution(session, STEPS, problem_text="What is the shared problem?")
        shared_label = make_rated_label(
            session,
            alice,
            shared,
            [1, 1, -1],
            total_time=90_000,
            timestamp=datetime(2026, 11, 20, 9),
        )
        make_rated_label(session, bob, shared, [1, 0, -1])
        # An admin's try of the queue is no labeler's work: it is compared with nobody.
        make_rated_label(session, admin, shared, [-1])
        carols = make_solution(session, STEPS, problem_text=CAROLS_PROBLEM)
        make_rated_label(session, carol, carols, [1, 1, 1])

        question = make_solution(session, STEPS, problem_text="What is the QC question?")
        gold = make_rated_label(session, admin, question, [1, -1])
        mark_quality_control(session, question.id, gold.id)
        when = datetime(2026, 11, 21, 9)
        alices_answer = make_rated_label(
            session,
            alice,
            question,
            [1, 1, -1],
            total_time=30_000,
            timestamp=when,
            is_quality_control=True,
        )
        bobs_answer = make_rated_label(
            session, bob, question, [1, -1], timestamp=when, is_quality_control=True
        )

        waiting = make_solution(session, STEPS)
        waiting_gold = make_rated_label(session, admin, waiting, [1, 1, 1])
        mark_quality_control(session, waiting.id, waiting_gold.id)
        session.commit()
        return World(shared_label.id, alices_answer.id, bobs_answer.id, waiting_gold.id)


@pytest.fixture
def alice(engine: Engine, world: World) -> Iterator[TestClient]:
    with TestClient(create_app()) as client:
        log_in(client, "alice")
        yield client


def text(html: str) -> str:
    """What a piece of HTML reads as: its text, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def cells(html: str, heading: str) -> list[list[str]]:
    """The body rows of the table in the section under ``heading``, as cell texts."""
    section = html.split(f">{heading}</h2>", 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>", 1)[1], re.S)
    return [[text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]


def test_my_work_shows_history_time_and_agreement(alice: TestClient, world: World) -> None:
    page = alice.get("/me").text
    assert re.search(r"Time spent in total</dt><dd>2:00</dd>", page)
    assert re.search(r"Median time per task</dt>\s*<dd>1:00</dd>", page)
    # Against Bob: 2 of 3 ratings of the shared solution. The QC answers are compared with
    # the answer key, not with each other (as on the Agreement page).
    assert re.search(r"Agreement with other labelers</dt>\s*<dd>66.7%</dd>", page)
    assert "2 of your\n  3 ratings matched theirs" in page
    assert cells(page, "History") == [
        [
            "2026-11-21 09:00",
            "What is the QC question?",
            "quality control",
            "found error",
            "3",
            "0:30",
            "—",
        ],
        [
            "2026-11-20 09:00",
            "What is the shared problem?",
            "task",
            "found error",
            "3",
            "1:30",
            "66.7% (2 of 3 ratings)",
        ],
    ]


def test_my_agreement_is_the_agreement_pages_figure_for_me(engine: Engine) -> None:
    """What /me tells a labeler is what their admin reads in their Agreement row: a label
    replaced by a later one, alternative completions, an admin's label and QC answers are
    left out of both, and the history's rows add up to the total."""
    with Session(engine) as session:
        alice, bob, carol = (make_user(session, name) for name in ("alice", "bob", "carol"))
        admin = make_user(session, "admin", role=Role.ADMIN)
        first, second = (make_solution(session, STEPS) for _ in range(2))
        replaced = make_rated_label(
            session, alice, first, [1, 1, -1], timestamp=datetime(2026, 11, 1)
        )
        make_rated_label(session, alice, first, [1, -1], timestamp=datetime(2026, 11, 2))
        make_rated_label(session, bob, first, [1, 0, -1], alternatives=[1, -1])
        make_rated_label(session, carol, first, [1, 1])
        make_rated_label(session, alice, second, [1, 1, 1], alternatives=[-1])
        make_rated_label(session, bob, second, [0, 1, 1], alternatives=[1])
        make_rated_label(session, admin, second, [-1])
        question = make_solution(session, STEPS)
        mark_quality_control(
            session, question.id, make_rated_label(session, admin, question, [1]).id
        )
        for labeler in (alice, bob):
            make_rated_label(session, labeler, question, [1, -1], is_quality_control=True)
        session.commit()

        rows = {row.labeler.name: row for row in agreement_report(session, 0.8).labelers}
        for labeler in (alice, bob, carol):
            mine = my_work(session, labeler.id, datetime(2026, 11, 28)).agreement
            assert mine.compared == rows[labeler.name].rating_pairs
            assert mine.share == rows[labeler.name].observed_agreement
            history = my_history(session, labeler.id, 1).rows
            counted = [row.agreement for row in history if row.agreement]
            assert sum(row.compared for row in counted) == mine.compared
            assert sum(row.agreeing for row in counted) == mine.agreeing
        # Alice against Bob and Carol on the first (2 steps each: 1 agrees with each), Bob on
        # the second (3 steps: 2 agree); alternatives aside.
        alices = my_work(session, alice.id, datetime(2026, 11, 28)).agreement
        assert (alices.compared, alices.agreeing) == (7, 4)
        assert [row.agreement for row in my_history(session, alice.id, 1).rows][-1] is None
        assert replaced.id == my_history(session, alice.id, 1).rows[-1].label_id


def review_ratings(html: str) -> list[list[str]]:
    """The rating cells of each row of an answer page's table: the labeler's, then the key's
    where the page shows it."""
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html.split("<tbody>", 1)[1], re.S)
    return [found for row in rows if (found := re.findall(r'rating-cell (\w+)">', row))]


KEY_HIDDEN = "The answer key stays hidden: this question is still asked, and may come to you again."


def test_a_question_still_asked_shows_my_answer_not_the_key(
    alice: TestClient, world: World
) -> None:
    """QC questions are served again in every generation, so the key of one still marked
    would answer Alice's next round of it: she sees her ratings and how many matched."""
    page = alice.get("/me").text
    # Steps 1 and 2 compared with the key (+1, -1): one matches.
    assert cells(page, "Quality control") == [
        [
            "2026-11-21 09:00",
            "quality control",
            "What is the QC question?",
            "50.0% (1 of 2 ratings)",
            "hidden while asked",
            "See your answer",
        ]
    ]
    assert "See the answer key" not in page
    assert f'href="/me/answers/{world.alices_answer}"' in page
    assert "the bar is 80.0%" in page

    review = alice.get(f"/me/answers/{world.alices_answer}")
    assert review.status_code == 200
    # Hers alone (+1, +1, -1): the key's -1 at step 2 and where it stopped are not shown.
    assert review_ratings(review.text) == [["positive"], ["positive"], ["negative"]]
    assert KEY_HIDDEN in review.text
    assert "(1 of 2 ratings)" in text(review.text)
    assert "You ended it as found error." in review.text and "the key as" not in review.text


def alices_work_and_answer(label_id: int) -> tuple[str, Response]:
    """Alice's /me page, and her answer page of ``label_id``."""
    with TestClient(create_app()) as client:
        log_in(client, "alice")
        return client.get("/me").text, client.get(f"/me/answers/{label_id}")


def test_a_given_up_answer_shows_nothing_of_the_key(engine: Engine) -> None:
    """The reviewer's reproduction: a "Give up" that rates no step answers a QC question
    (and counts for nothing), then its answer page would show every rating of the key."""
    with Session(engine) as session:
        alice, admin = make_user(session, "alice"), make_user(session, "admin", role=Role.ADMIN)
        question = make_solution(session, STEPS)
        gold = make_rated_label(session, admin, question, [1, 0, -1])
        mark_quality_control(session, question.id, gold.id)
        answer = make_rated_label(
            session, alice, question, [], finish_reason="give_up", is_quality_control=True
        ).id
        session.commit()
    page, review = alices_work_and_answer(answer)
    assert "See the answer key" not in page
    assert review.status_code == 200
    assert KEY_HIDDEN in review.text
    # No rating and no step the key reached: how far it went says where it found the error.
    assert review_ratings(review.text) == []
    assert "rating-cell" not in review.text and "x^2" not in review.text
    assert "the key as" not in review.text


def test_a_screening_answer_shows_the_key(engine: Engine) -> None:
    """A screening question is served to each labeler once (and joins no generation's
    questions), so its key answers nothing Alice will be asked again."""
    with Session(engine) as session:
        alice, admin = make_user(session, "alice"), make_user(session, "admin", role=Role.ADMIN)
        question = make_solution(
            session, STEPS, generation=SCREENING_GENERATION, problem_text="What is screened?"
        )
        gold = make_rated_label(session, admin, question, [1, 0, -1])
        mark_quality_control(session, question.id, gold.id)
        answer = make_rated_label(session, alice, question, [1, 1, 1], is_initial_screening=True).id
        session.commit()
    page, review = alices_work_and_answer(answer)
    assert cells(page, "Quality control")[0][1:] == [
        "screening",
        "What is screened?",
        "33.3% (1 of 3 ratings)",
        "not the key's",
        "See the answer key",
    ]
    assert review.status_code == 200 and KEY_HIDDEN not in review.text
    assert review_ratings(review.text) == [
        ["positive", "positive"],
        ["positive", "neutral"],
        ["positive", "negative"],
    ]
    assert "You ended it as solution;\n    the key as found error." in review.text


def test_a_retired_questions_answers_leave_my_work(engine: Engine) -> None:
    """Unmarking a question forgets its gold label: its answers are answers to nothing (as
    in the QC figures), so neither they nor the key show."""
    with Session(engine) as session:
        alice, admin = make_user(session, "alice"), make_user(session, "admin", role=Role.ADMIN)
        question = make_solution(session, STEPS)
        gold = make_rated_label(session, admin, question, [1, 0, -1])
        mark_quality_control(session, question.id, gold.id)
        answer = make_rated_label(session, alice, question, [1, 1], is_quality_control=True).id
        unmark_quality_control(session, question.id)
        session.commit()
    page, review = alices_work_and_answer(answer)
    assert "You have not answered a quality-control question yet" in page
    assert review.status_code == 404


def test_an_answer_rating_no_step_says_so(engine: Engine) -> None:
    with Session(engine) as session:
        alice, admin = make_user(session, "alice"), make_user(session, "admin", role=Role.ADMIN)
        question = make_solution(session, STEPS)
        mark_quality_control(
            session, question.id, make_rated_label(session, admin, question, [1]).id
        )
        make_rated_label(
            session, alice, question, [], finish_reason="bad_problem", is_quality_control=True
        )
        session.commit()
    with TestClient(create_app()) as client:
        log_in(client, "alice")
        page = client.get("/me").text
    assert cells(page, "Quality control")[0][3] == "no rating compared"
    assert "(0 of 0 ratings)" not in page


def test_a_labeler_sees_only_their_own_work(alice: TestClient, world: World) -> None:
    page = alice.get("/me").text
    # The CSRF token is random letters: "bob" turned up in one.
    page = page.replace(csrf_from(page), "")
    assert CAROLS_PROBLEM.replace("'", "&#39;") not in page and "bob" not in page.lower()
    assert len(cells(page, "History")) == 2
    # The key of a question not yet answered, someone else's answer, a label that answers
    # no question, and no label at all: the same 404.
    for label_id in (world.unanswered_gold, world.bobs_answer, world.shared_label, 10**6):
        response = alice.get(f"/me/answers/{label_id}")
        assert response.status_code == 404, label_id
        assert "There is no such answer of yours." in response.text
    assert alice.get("/me/answers/0").status_code == 422
    assert alice.get("/me?page=0").status_code == 422


def test_history_pages_swap_in_as_fragments(engine: Engine) -> None:
    with Session(engine) as session:
        dana = make_user(session, "dana")
        for minute in range(PAGE_SIZE + 1):
            solution = make_solution(session, STEPS)
            make_rated_label(
                session, dana, solution, [1], timestamp=datetime(2026, 1, 1, 9, minute)
            )
        session.commit()
    with TestClient(create_app()) as client:
        log_in(client, "dana")
        first = client.get("/me").text
        assert len(cells(first, "History")) == PAGE_SIZE and "Page 1 of 2" in first
        assert "No other labeler has rated the same steps as you yet" in first
        assert "You have not answered a quality-control question yet" in first
        second = client.get("/me?page=2", headers={"HX-Request": "true"}).text
        assert second.lstrip().startswith('<div id="history">') and "<h1>" not in second
        assert second.count("2026-01-01 09:00") == 1 and "Page 2 of 2" in second
        # Past the last page: the last page.
        assert "Page 2 of 2" in client.get("/me?page=999").text


def test_logged_out_visitors_are_sent_to_log_in(engine: Engine) -> None:
    with TestClient(create_app()) as client:
        for path in ("/me", "/me/answers/1"):
            response = client.get(path, follow_redirects=False)
            assert response.status_code == 303, path
            assert response.headers["location"].startswith("/login")


def test_a_task_made_a_question_later_shows_no_answer_key(engine: Engine) -> None:
    """Alice labeled a solution as a task; an admin then made it a quality-control question.
    Her label answers no question: /me lists it as a task, with no comparison with the key,
    and its answer page is the 404 of a label that answers nothing, so the key stays hidden
    while the question is served to her and to others."""
    with Session(engine) as session:
        alice, admin = make_user(session, "alice"), make_user(session, "admin", role=Role.ADMIN)
        solution = make_solution(session, STEPS, problem_text="What became a question?")
        task = make_rated_label(
            session, alice, solution, [1, 1, -1], timestamp=datetime(2026, 11, 20, 9)
        ).id
        gold = make_rated_label(session, admin, solution, [1, -1])
        mark_quality_control(session, solution.id, gold.id)
        session.commit()
    page, answer = alices_work_and_answer(task)
    assert "You have not answered a quality-control question yet" in page
    assert f"/me/answers/{task}" not in page and "See the answer key" not in page
    assert cells(page, "History") == [
        ["2026-11-20 09:00", "What became a question?", "task", "found error", "3", "—", "—"]
    ]
    assert answer.status_code == 404
    assert "There is no such answer of yours." in answer.text
