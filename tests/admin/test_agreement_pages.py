"""The agreement pages and API over HTTP: access, the same numbers on page and JSON, updates.

The project has regular labels by five labelers and answers to QC and screening questions."""

import html
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.models import AuditEntry, Role
from app.templating import decimal, number, percent
from tests.admin.projects import (
    LABELERS,
    Stored,
    random_gold_questions,
    random_project,
    store,
    store_gold,
)
from tests.factories import make_rated_label, make_solution, make_user
from tests.web import add_user, admin_client, log_in

PAGES = ("/admin/agreement", "/admin/agreement/items")
APIS = ("/api/admin/agreement", "/api/admin/agreement/items")


@pytest.fixture
def project(engine: Engine) -> Stored:
    with Session(engine, expire_on_commit=False) as session:
        stored = store(session, random_project(seed=11, generations=(0, 1)))
        store_gold(session, random_gold_questions(seed=12), stored.users)
        session.commit()
    return stored


def cell(page: str, element_id: str) -> str:
    """The text of the element with this id (a figure on the page)."""
    match = re.search(rf'id="{element_id}">([^<]*)<', page)
    assert match, f"no #{element_id} on the page"
    return html.unescape(match.group(1)).strip()


def gold_cells(comparison: dict[str, Any]) -> list[str]:
    """The page's cells of a comparison with gold: answers, steps agree, first error agrees."""
    return [
        number(comparison["answers"]),
        percent(comparison["step_accuracy"]),
        percent(comparison["first_error_accuracy"]),
    ]


def verdict(passes: bool | None) -> str:
    return {None: "no gold yet", True: "passes", False: "below threshold"}[passes]


def row_cells(page: str, row_id: str) -> list[str]:
    """The cells' text of the table row with this id, brackets and all."""
    match = re.search(rf'<tr id="{row_id}">(.*?)</tr>', page, re.DOTALL)
    assert match, f"no row #{row_id}"
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", match.group(1), re.DOTALL)
    return [html.unescape(re.sub(r"<[^>]+>", "", text)).split("(")[0].strip() for text in cells]


def test_a_labeler_gets_403_from_every_agreement_page_and_api(
    app_client: TestClient, engine: Engine, project: Stored
) -> None:
    add_user(engine, "lee")
    log_in(app_client, "lee")
    solution_id = project.solutions[0].id
    for path in (*PAGES, *APIS, f"{PAGES[1]}/{solution_id}", f"{APIS[1]}/{solution_id}"):
        response = app_client.get(path)
        assert response.status_code == 403, path
        assert "kappa" not in response.text.lower()


def test_logged_out_pages_go_to_login_and_the_api_answers_401(app_client: TestClient) -> None:
    assert app_client.get(PAGES[0], follow_redirects=False).status_code == 303
    assert app_client.get(APIS[0]).status_code == 401


def test_the_page_shows_the_numbers_of_the_json(
    app_client: TestClient, engine: Engine, project: Stored
) -> None:
    admin_client(app_client, engine)
    report = app_client.get(APIS[0]).json()
    page = app_client.get(PAGES[0]).text
    overall = report["overall"]
    assert cell(page, "overall-krippendorff_alpha") == decimal(overall["krippendorff_alpha"])
    assert cell(page, "overall-fleiss_kappa") == decimal(overall["fleiss_kappa"])
    assert cell(page, "overall-observed_agreement") == percent(overall["observed_agreement"])
    first_error = overall["first_error"]
    assert cell(page, "overall-first_error_exact") == percent(first_error["exact"])
    assert cell(page, "overall-first_error_within_one_step") == percent(
        first_error["within_one_step"]
    )
    assert cell(page, "overall-finish_reason") == percent(overall["finish_reason"]["agreement"])
    assert cell(page, "overall-solutions") == str(overall["solutions"])
    qc = report["quality_control"]
    assert qc["answers"] > 0
    assert cell(page, "overall-qc_step_accuracy") == percent(qc["step_accuracy"])
    assert cell(page, "overall-qc_first_error_accuracy") == percent(qc["first_error_accuracy"])

    for row in report["by_generation"]:
        assert row_cells(page, f"generation-{row['generation']}") == [
            str(row["generation"]),
            str(row["solutions"]),
            str(row["steps"]),
            decimal(row["krippendorff_alpha"]),
            decimal(row["fleiss_kappa"]),
            percent(row["observed_agreement"]),
            percent(row["first_error"]["exact"]),
            percent(row["first_error"]["within_one_step"]),
            percent(row["finish_reason"]["agreement"]),
            *gold_cells(row["quality_control"]),
        ]
    for row in report["labelers"]:
        assert row_cells(page, f"labeler-{row['labeler']['id']}") == [
            row["labeler"]["name"],
            str(row["labels"]),
            str(row["shared_steps"]),
            percent(row["observed_agreement"]),
            decimal(row["kappa"]),
            *gold_cells(row["quality_control"]),
            verdict(row["passes_quality_control"]),
            percent(row["screening"]["step_accuracy"]),
            verdict(row["passes_screening"]),
            percent(row["flag_rate"]),
            percent(row["give_up_rate"]),
            percent(row["bad_problem_rate"]),
        ]
    # The quality-control page's own JSON has the same figures against gold.
    quality = {row["labeler_id"]: row for row in app_client.get("/api/admin/quality").json()}
    for row in report["labelers"]:
        same = quality[row["labeler"]["id"]]
        assert (row["quality_control"], row["screening"]) == (
            same["quality_control"],
            same["screening"],
        )
    matrix = page[page.index('id="kappa-matrix"') :]
    for pair in report["pairs"]:
        names = f"{pair['first']['name']} and {pair['second']['name']}: "
        shown = re.search(re.escape(names) + r'[^"]*">([^<]*)</td>', matrix)
        assert shown and shown.group(1) == decimal(pair["cohen_kappa"], 2), names
    assert len(report["labelers"]) == len(LABELERS)


def test_a_generation_filter_narrows_page_and_json(
    app_client: TestClient, engine: Engine, project: Stored
) -> None:
    admin_client(app_client, engine)
    whole = app_client.get(APIS[0]).json()
    one = app_client.get(APIS[0], params={"generation": 1}).json()
    assert one["generation"] == 1
    (generation_one,) = [row for row in whole["by_generation"] if row["generation"] == 1]
    assert one["overall"]["steps"] == generation_one["steps"] < whole["overall"]["steps"]
    page = app_client.get(PAGES[0], params={"generation": 1}).text
    assert cell(page, "overall-krippendorff_alpha") == decimal(generation_one["krippendorff_alpha"])
    assert '<a href="/admin/agreement?generation=1" aria-current="page">' in page
    assert app_client.get(APIS[0], params={"generation": "first"}).status_code == 422


def test_the_figures_move_when_a_label_arrives(
    app_client: TestClient, engine: Engine, project: Stored
) -> None:
    admin_client(app_client, engine)
    before = app_client.get(APIS[0]).json()["overall"]
    fragment = app_client.get(PAGES[0], headers={"HX-Request": "true"}).text
    assert fragment.startswith('<div id="figures"')
    assert 'hx-trigger="every 30s, dashboard-refresh from:body"' in fragment
    assert "<html" not in fragment

    with Session(engine) as session:
        newcomer = make_user(session, "newcomer")
        solution = project.solutions[0]
        steps = len(solution.steps or [])
        make_rated_label(
            session, newcomer, solution, [-1 if n == steps - 1 else 0 for n in range(steps)]
        )
        session.commit()

    after = app_client.get(APIS[0]).json()["overall"]
    assert after["ratings"] > before["ratings"]
    assert after["labels"] == before["labels"] + 1
    assert after["krippendorff_alpha"] != before["krippendorff_alpha"]
    refreshed = app_client.get(PAGES[0], headers={"HX-Request": "true"}).text
    assert cell(refreshed, "overall-krippendorff_alpha") == decimal(after["krippendorff_alpha"])
    assert "newcomer" in refreshed


def test_the_overview_shows_the_headline_agreement_and_follows_new_labels(
    app_client: TestClient, engine: Engine, project: Stored
) -> None:
    admin_client(app_client, engine)
    overall = app_client.get(APIS[0]).json()["overall"]
    assert app_client.get("/api/admin/overview").json()["agreement"] == overall
    page = app_client.get("/admin").text
    assert cell(page, "agreement-alpha") == decimal(overall["krippendorff_alpha"])
    tile = page[: page.index('id="agreement-alpha"')].rsplit("<dt>", 1)[1]
    assert '<a href="/admin/agreement">' in tile
    assert f"{overall['steps']:,} shared steps" in page

    with Session(engine) as session:
        newcomer = make_user(session, "newcomer")
        solution = project.solutions[1]
        make_rated_label(session, newcomer, solution, [-1])
        session.commit()
    after = app_client.get(APIS[0]).json()["overall"]
    assert after["steps"] >= overall["steps"] and after["ratings"] == overall["ratings"] + 1
    fragment = app_client.get("/admin", headers={"HX-Request": "true"}).text
    assert fragment.startswith('<div id="figures"') and "<html" not in fragment
    assert cell(fragment, "agreement-alpha") == decimal(after["krippendorff_alpha"])
    assert f"{after['steps']:,} shared steps" in fragment


def test_the_drill_down_pages_match_their_json(
    app_client: TestClient, engine: Engine, project: Stored
) -> None:
    admin_client(app_client, engine)
    items = app_client.get(APIS[1]).json()
    assert items["total"] > 0 and items["items"][0]["rank"] == 1
    page = app_client.get(PAGES[1]).text
    for item in items["items"]:
        cells = row_cells(page, f"item-{item['solution_id']}")
        assert cells[:2] == [str(item["rank"]), str(item["solution_id"])]
        progress = f"{item['disagreeing_steps']} of {item['shared_steps']}"
        assert cells[4:6] == [f"{item['score']:.2f}", progress]

    top = items["items"][0]["solution_id"]
    detail = app_client.get(f"{APIS[1]}/{top}").json()
    item_page = app_client.get(f"{PAGES[1]}/{top}").text
    for label in detail["labels"]:
        assert f'<th scope="col" class="labeler-column">{label["labeler"]["name"]}' in item_page
    ratings = re.findall(r'<td class="rating-cell (\w+)">', item_page)
    expected = [
        {1: "positive", 0: "neutral", -1: "negative"}[step["rating"]] if step else "unreached"
        for index in range(len(detail["steps"]))
        for step in (label["steps"][index] for label in detail["labels"])
    ]
    assert ratings == expected
    assert app_client.get(f"{PAGES[1]}/999999").status_code == 404
    assert app_client.get(f"{APIS[1]}/999999").status_code == 404


def test_the_item_page_escapes_text_and_keeps_math_for_katex(
    app_client: TestClient, engine: Engine
) -> None:
    with Session(engine) as session:
        solution = make_solution(
            session,
            ["<script>alert(1)</script> so $x^2 < 4$.", "Done."],
            problem_text="Is <b>bold</b> when $a<b$?",
        )
        for name, ratings in (("ann", [1, 1]), ("ben", [-1])):
            make_rated_label(session, make_user(session, name), solution, ratings)
        session.commit()
        solution_id = solution.id
    admin_client(app_client, engine)
    page = app_client.get(f"{PAGES[1]}/{solution_id}").text
    assert "<script>alert(1)" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; so $x^2 &lt; 4$." in page
    assert 'class="math-text"' in page


def test_the_drill_down_pages_keep_the_generation_filter(
    app_client: TestClient, engine: Engine
) -> None:
    with Session(engine) as session:
        ann, ben = make_user(session, "ann"), make_user(session, "ben")
        for _ in range(30):
            solution = make_solution(session, ["A.", "B."], generation=2)
            make_rated_label(session, ann, solution, [1, 1])
            make_rated_label(session, ben, solution, [0])
        session.commit()
    admin_client(app_client, engine)
    first = app_client.get(PAGES[1], params={"generation": 2}).text
    assert 'href="/admin/agreement/items?generation=2&amp;page=2" rel="next"' in first
    second = app_client.get(
        PAGES[1], params={"generation": 2, "page": 2}, headers={"HX-Request": "true"}
    ).text
    assert second.startswith('<div id="item-table">') and "Page 2 of 2" in second
    assert 'href="/admin/agreement/items?generation=2&amp;page=1" rel="prev"' in second


def test_phase1_labels_are_generation_none_everywhere_agreement_shows_them(
    app_client: TestClient, engine: Engine
) -> None:
    """A phase-1 task queued in generation 0 has labels without a generation (as PRM800K's
    phase-1 lines): the pages say "none", filter on it, and count it per generation."""
    with Session(engine) as session:
        ann, ben = make_user(session, "ann"), make_user(session, "ben")
        phase1 = make_solution(session, ["A.", "B."], generation=None)
        phase1.style = "phase1"
        phase2 = make_solution(session, ["C.", "D."], generation=0)
        for labeler, ratings in ((ann, [1, 1]), (ben, [1, -1])):
            assert make_rated_label(session, labeler, phase1, ratings).generation is None
        for labeler, ratings in ((ann, [1, 1]), (ben, [-1])):
            assert make_rated_label(session, labeler, phase2, ratings).generation == 0
        phase1.generation = 0  # queued in generation 0, its labels without one
        session.commit()
        phase1_id = phase1.id
    admin_client(app_client, engine)

    item = app_client.get(f"{PAGES[1]}/{phase1_id}").text
    assert "· Generation none" in item and "Generation 0" not in item
    assert app_client.get(f"{APIS[1]}/{phase1_id}").json()["generation"] is None

    listing = app_client.get(PAGES[1]).text
    assert '<a href="/admin/agreement/items?generation=none">none</a>' in listing
    assert row_cells(listing, f"item-{phase1_id}")[3] == "none"
    only_none = app_client.get(APIS[1], params={"generation": "none"}).json()
    assert [entry["solution_id"] for entry in only_none["items"]] == [phase1_id]

    report = app_client.get(APIS[0]).json()
    assert [row["generation"] for row in report["by_generation"]] == [0, None]
    assert [row["solutions"] for row in report["by_generation"]] == [1, 1]
    agreement = app_client.get(PAGES[0]).text
    assert 'id="generation-none"' in agreement
    assert (
        app_client.get(APIS[0], params={"generation": "none"}).json()["overall"]["solutions"] == 1
    )
    assert app_client.get(APIS[0], params={"generation": "zero"}).status_code == 422


def test_an_alternative_that_ends_the_solution_shows_its_answer_as_the_step_does(
    app_client: TestClient, engine: Engine
) -> None:
    """The drill-down showed an alternative's (and a written step's) "# Answer" heading as
    a raw paragraph, where the solution's own last step shows "Answer: 30"."""
    ending = "So $x = 30$.\n\n# Answer\n\n30"
    with Session(engine) as session:
        solution = make_solution(
            session, ["Let $x = 3 \\cdot 10$.", "So $x = 31$.\n\n# Answer\n\n31"]
        )
        ann = make_rated_label(
            session, make_user(session, "ann"), solution, [1, -1], alternatives=[1]
        )
        make_rated_label(session, make_user(session, "ben"), solution, [1, 1])
        alternative = next(c for c in ann.steps[1].completions if c.completion_index == 1)
        alternative.text = ending
        ann.steps[1].human_completion = {
            "text": ending,
            "rating": None,
            "source": "human",
            "flagged": False,
        }
        session.commit()
        solution_id = solution.id
    admin_client(app_client, engine)
    page = html.unescape(app_client.get(f"{PAGES[1]}/{solution_id}").text)
    assert "# Answer" not in page
    assert page.count('<span class="step-answer-label">Answer:</span> $30$') == 2
    assert '<span class="step-answer-label">Answer:</span> $31$' in page


def test_a_solution_with_fewer_than_two_labelers_shows_its_final_label_and_refusals(
    app_client: TestClient, engine: Engine
) -> None:
    with Session(engine) as session:
        alone = make_solution(session, ["A.", "B."])
        make_rated_label(session, make_user(session, "ann"), alone, [1, -1])
        unlabeled = make_solution(session, ["C."])
        session.commit()
        alone_id, unlabeled_id = alone.id, unlabeled.id
    add_user(engine, "root", role=Role.ADMIN)
    token = log_in(app_client, "root")
    page = app_client.get(f"{PAGES[1]}/{alone_id}").text
    assert "Fewer than two labelers" in page and "By one judging label:" in page
    refused = app_client.post(
        f"{PAGES[1]}/{unlabeled_id}/adjudication", data={"rating": ["1"], "csrf_token": token}
    )
    assert refused.status_code == 422
    assert 'role="alert"' in refused.text and "no labels" in refused.text


def tied_solution(engine: Engine) -> int:
    """A three-step solution whose two labelers tie at step 2: it needs adjudication."""
    with Session(engine) as session:
        solution = make_solution(session, ["A.", "B.", "C."])
        make_rated_label(session, make_user(session, "ann"), solution, [1, -1])
        make_rated_label(session, make_user(session, "ben"), solution, [1, 1, 1])
        session.commit()
        return solution.id


def test_a_tie_is_listed_as_needing_adjudication_until_an_admin_decides(
    app_client: TestClient, engine: Engine
) -> None:
    solution_id = tied_solution(engine)
    add_user(engine, "lee")
    token = log_in(app_client, "lee")
    adjudication = f"{PAGES[1]}/{solution_id}/adjudication"
    refused = app_client.post(adjudication, data={"rating": ["1", "1", "1"], "csrf_token": token})
    assert refused.status_code == 403
    add_user(engine, "root", role=Role.ADMIN)
    token = log_in(app_client, "root")

    listing = app_client.get(PAGES[1]).text
    assert row_cells(listing, f"item-{solution_id}")[-1] == "needs adjudication"
    assert f'href="/admin/agreement/items/{solution_id}#consensus"' in listing
    assert app_client.get(APIS[1]).json()["items"][0]["final_label"] == "needs adjudication"

    bad = app_client.post(adjudication, data={"rating": ["1", "", "1"], "csrf_token": token})
    assert bad.status_code == 422 and "step 2 has no rating" in bad.text
    for odd in ({"rating": ["²"]}, {"source_label_id": "٣"}, {"source_label_id": "99999999999"}):
        answer = app_client.post(adjudication, data={**odd, "csrf_token": token})
        assert answer.status_code == 422 and "is not a rating or label id" in answer.text
    done = app_client.post(
        adjudication, data={"rating": ["1", "1", "-1"], "csrf_token": token}, follow_redirects=False
    )
    assert done.status_code == 303
    assert done.headers["location"] == f"/admin/agreement/items/{solution_id}#consensus"
    assert row_cells(app_client.get(PAGES[1]).text, f"item-{solution_id}")[-1] == "adjudicated"
    final = app_client.get(f"{APIS[1]}/{solution_id}/consensus").json()
    assert (final["method"], final["ratings"], final["adjudicated_by"]) == (
        "adjudicated",
        [1, 1, -1],
        "root",
    )


def test_an_adjudication_can_be_cleared_and_the_vote_decides_again(
    app_client: TestClient, engine: Engine
) -> None:
    """An admin who adjudicated by mistake clears it: the tie needs adjudication again, and
    the audit log keeps the decision cleared. Clearing what is not there says so."""
    solution_id = tied_solution(engine)
    add_user(engine, "root", role=Role.ADMIN)
    token = log_in(app_client, "root")
    adjudication = f"{PAGES[1]}/{solution_id}/adjudication"
    app_client.post(adjudication, data={"rating": ["1", "1", "-1"], "csrf_token": token})
    page = app_client.get(f"{PAGES[1]}/{solution_id}").text
    assert f'action="{adjudication}/clear"' in page

    cleared = app_client.post(
        f"{adjudication}/clear", data={"csrf_token": token}, follow_redirects=False
    )
    assert cleared.status_code == 303
    assert cleared.headers["location"] == f"/admin/agreement/items/{solution_id}#consensus"
    final = app_client.get(f"{APIS[1]}/{solution_id}/consensus").json()
    assert (final["status"], final["method"]) == ("needs_adjudication", None)
    assert f'action="{adjudication}/clear"' not in app_client.get(f"{PAGES[1]}/{solution_id}").text
    with Session(engine) as session:
        entries = session.execute(
            select(AuditEntry.target, AuditEntry.before, AuditEntry.after).where(
                AuditEntry.action == "consensus.clear"
            )
        ).all()
    assert [(target, before["ratings"], after) for target, before, after in entries] == [
        (f"solution {solution_id}", [1, 1, -1], None)
    ]
    again = app_client.post(f"{adjudication}/clear", data={"csrf_token": token})
    assert again.status_code == 422 and "is not adjudicated" in again.text
