"""Consensus on stored labels: which labels vote, adjudication, and the consensus export."""

import io
import json
from datetime import datetime

import pytest
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import prm800k
from app.consensus.service import (
    CONSENSUS_LABELER,
    PROVENANCE_KEY,
    AdjudicationError,
    adjudicate,
    solution_consensus,
)
from app.datasets.export import (
    ExportFilter,
    consensus_records,
    iter_records,
    write_consensus_export,
)
from app.models import AuditEntry, Role, TaskStyle
from tests.factories import make_rated_label, make_solution, make_user

THREE_STEPS = ["One.", "Two.", "Three.\n\n# Answer\n\n3"]


def test_consensus_line_per_solution_with_provenance(session: Session) -> None:
    alice, bob, carol = (make_user(session, name) for name in ("alice", "bob", "carol"))
    voted = make_solution(session, THREE_STEPS, generation=2)
    make_rated_label(session, alice, voted, [1, -1])
    make_rated_label(session, bob, voted, [1, -1], timestamp=datetime(2024, 1, 3))
    make_rated_label(session, carol, voted, [1, 1, 1])
    tied = make_solution(session, THREE_STEPS)
    make_rated_label(session, alice, tied, [1, -1])
    make_rated_label(session, bob, tied, [1, 1, 1])
    single = make_solution(session, THREE_STEPS)
    only = make_rated_label(session, alice, single, [0, 1, 1])
    make_rated_label(session, bob, single, [1], finish_reason="give_up")
    voted.source_id = single.source_id = "pipeline-7"  # the id a pipeline joins by

    out = io.StringIO()
    summary = write_consensus_export(session, out, ExportFilter())
    lines = [json.loads(text) for text in out.getvalue().splitlines()]
    assert (summary.lines, summary.needs_adjudication, dict(summary.by_method)) == (
        2,
        1,
        {"majority": 1, "single": 1},
    )
    by_solution = {line[PROVENANCE_KEY]["solution_id"]: line for line in lines}
    assert set(by_solution) == {voted.id, single.id}

    line = by_solution[voted.id]
    # PRM800K's own keys, in its order, as a PRM800K reader sees them, and the pipeline's id
    # as every export writes it: last but the provenance.
    assert list(line)[:-1] == list(next(iter_records(session, ExportFilter())))
    assert list(line)[-2:] == [prm800k.EXTERNAL_ID, PROVENANCE_KEY]
    assert line[prm800k.EXTERNAL_ID] == by_solution[single.id][prm800k.EXTERNAL_ID] == "pipeline-7"
    plain = {key: value for key, value in line.items() if key != PROVENANCE_KEY}
    prm800k.Record.model_validate(plain)
    # With its provenance it is a consensus line, which import refuses, saying so.
    with pytest.raises(ValidationError, match="a line of the consensus export"):
        prm800k.parse_line(json.dumps(line))
    assert line["labeler"] == CONSENSUS_LABELER
    assert line["generation"] == 2
    assert line["timestamp"] == "2024-01-03T00:00:00"
    assert [s["completions"][0]["rating"] for s in line["label"]["steps"]] == [1, -1]
    assert [s["chosen_completion"] for s in line["label"]["steps"]] == [0, None]
    assert line["label"]["finish_reason"] == "found_error"
    provenance = line[PROVENANCE_KEY]
    assert provenance["method"] == "majority"
    assert [entry["voted"] for entry in provenance["labels"]] == [True, True, True]
    assert provenance["adjudicated_by"] is None

    # One judging label: that label's own line, unchanged.
    own = by_solution[single.id]
    assert own["labeler"] == alice.uuid
    assert own["timestamp"] == only.timestamp.isoformat()
    assert [entry["voted"] for entry in own[PROVENANCE_KEY]["labels"]] == [True, False]


def test_adjudication_resolves_a_tie_and_is_exported(session: Session) -> None:
    alice, bob = make_user(session, "alice"), make_user(session, "bob")
    admin = make_user(session, "root", role=Role.ADMIN)
    tied = make_solution(session, THREE_STEPS)
    make_rated_label(session, alice, tied, [1, -1])
    bobs = make_rated_label(session, bob, tied, [1, 1, 1])
    assert solution_consensus(session, tied.id).status == "needs_adjudication"
    assert solution_consensus(session, tied.id).tied_step == 1

    adjudicate(session, tied.id, admin.id, source_label_id=bobs.id)
    view = solution_consensus(session, tied.id)
    assert (view.status, view.method, view.ratings) == ("decided", "adjudicated", [1, 1, 1])
    assert view.adjudicated_by == "root" and view.source_label_id == bobs.id
    assert view.adjudicated_at is not None

    # A later decision replaces it, ratings edited by hand.
    adjudicate(session, tied.id, admin.id, ratings=[0, 0, -1])
    (line,) = [line for _, line in consensus_records(session, ExportFilter())]
    assert [s["completions"][0]["rating"] for s in line["label"]["steps"]] == [0, 0, -1]
    provenance = line[PROVENANCE_KEY]
    assert provenance["method"] == "adjudicated"
    assert provenance["adjudicated_by"] == admin.uuid
    assert provenance["source_label_id"] is None
    assert line["timestamp"] == provenance["adjudicated_at"]

    # The audit log keeps each decision, and the one a later decision replaced.
    first, second = session.scalars(
        select(AuditEntry)
        .where(AuditEntry.action == "consensus.adjudicate")
        .order_by(AuditEntry.id)
    ).all()
    assert (first.actor, first.target, first.before) == ("root", f"solution {tied.id}", None)
    assert first.after is not None and first.after["source_label_id"] == bobs.id
    assert second.before == first.after
    assert second.after is not None and second.after["ratings"] == [0, 0, -1]


@pytest.mark.parametrize(
    ("ratings", "message"),
    [
        ([1, -1, 1], "step 2 is negative"),
        ([1, 1], "rate every step"),
        ([1, 5, 1], "must be -1, 0 or"),
    ],
)
def test_adjudication_refuses_a_path_prm800k_could_not_write(
    session: Session, ratings: list[int], message: str
) -> None:
    alice, bob = make_user(session, "alice"), make_user(session, "bob")
    admin = make_user(session, "root", role=Role.ADMIN)
    tied = make_solution(session, THREE_STEPS)
    make_rated_label(session, alice, tied, [1, -1])
    make_rated_label(session, bob, tied, [1, 1, 1])
    with pytest.raises(AdjudicationError, match=message):
        adjudicate(session, tied.id, admin.id, ratings=ratings)
    assert solution_consensus(session, tied.id).method is None
    assert session.scalars(select(AuditEntry)).all() == []


def test_phase1_labels_stay_their_own_lines(session: Session) -> None:
    alice, bob = make_user(session, "alice"), make_user(session, "bob")
    admin = make_user(session, "root", role=Role.ADMIN)
    candidates = make_solution(session, THREE_STEPS, generation=None)
    candidates.style = TaskStyle.PHASE1.value
    make_rated_label(session, alice, candidates, [1, -1])
    make_rated_label(session, bob, candidates, [1, 1, 1])
    lines = [line for _, line in consensus_records(session, ExportFilter())]
    assert [line[PROVENANCE_KEY]["method"] for line in lines] == ["phase1", "phase1"]
    assert sorted(line["labeler"] for line in lines) == sorted([alice.uuid, bob.uuid])
    assert solution_consensus(session, candidates.id).phase1
    with pytest.raises(AdjudicationError, match="phase-1"):
        adjudicate(session, candidates.id, admin.id, ratings=[1, 1, 1])


def test_quality_control_answers_and_admins_do_not_vote(session: Session) -> None:
    alice, bob = make_user(session, "alice"), make_user(session, "bob")
    admin = make_user(session, "root", role=Role.ADMIN)
    solution = make_solution(session, THREE_STEPS)
    make_rated_label(session, alice, solution, [1, 1, 1])
    make_rated_label(session, bob, solution, [1, -1], is_quality_control=True)
    make_rated_label(session, admin, solution, [1, -1])
    (line,) = [line for _, line in consensus_records(session, ExportFilter())]
    assert line[PROVENANCE_KEY]["method"] == "single"
    assert line["labeler"] == alice.uuid
