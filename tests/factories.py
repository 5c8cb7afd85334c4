"""Small typed builders of test data: PRM800K lines and their parts."""

import itertools
import json
import random
import uuid
from datetime import datetime
from typing import Any

from argon2 import PasswordHasher
from sqlalchemy import Connection
from sqlalchemy.orm import Session, object_session

from app.auth.sessions import Login
from app.labeling import repository, service
from app.labeling.queue import QueueRules
from app.labeling.repository import Lease, LeasedTask
from app.models import (
    SCREENING_GENERATION,
    Label,
    LabelStep,
    Problem,
    QueueState,
    Role,
    Solution,
    StepCompletion,
    User,
    utc_now,
)

LABELER_A = "e90a38f3-3135-4465-87af-3e6322e3d772"
LABELER_B = "cc88bf76-df08-4041-be67-3464279cb3b1"


def completion(text: str, rating: int | None = 1, flagged: bool | None = None) -> dict[str, Any]:
    return {"text": text, "rating": rating, "flagged": flagged}


def step(
    *completions: dict[str, Any],
    human: dict[str, Any] | None = None,
    chosen: int | None = 0,
) -> dict[str, Any]:
    return {
        "completions": list(completions),
        "human_completion": human,
        "chosen_completion": chosen,
    }


def human_completion(text: str, **extra: Any) -> dict[str, Any]:
    return {"text": text, "rating": None, "source": "human", "flagged": False, **extra}


def phase2_question(
    problem: str = "What is $2+3$?",
    steps: list[str] | None = None,
    *,
    answer: str | None = "5",
    solution: str | None = "We add: $2+3=\\boxed{5}$.",
    pre_generated_answer: str | None = "5",
    score: float | None = 0.8125,
) -> dict[str, Any]:
    return {
        "problem": problem,
        "ground_truth_solution": solution,
        "ground_truth_answer": answer,
        "pre_generated_steps": steps
        if steps is not None
        else ["Add.", "$2+3=5$.\n\n# Answer\n\n5"],
        "pre_generated_answer": pre_generated_answer,
        "pre_generated_verifier_score": score,
    }


def phase1_question(problem: str = "What is $2+3$?", answer: str | None = "5") -> dict[str, Any]:
    return {"problem": problem, "ground_truth_answer": answer}


def record(
    question: dict[str, Any] | None = None,
    steps: list[dict[str, Any]] | None = None,
    *,
    labeler: str = LABELER_A,
    timestamp: str = "2022-11-22T16:51:29.980606",  # DEFAULT_TIMESTAMP
    generation: int | None = 6,
    qc: bool = False,
    screening: bool = False,
    total_time: int | None = 164458,
    finish_reason: str | None = "solution",
) -> dict[str, Any]:
    """A PRM800K record with the official key order."""
    return {
        "labeler": labeler,
        "timestamp": timestamp,
        "generation": generation,
        "is_quality_control_question": qc,
        "is_initial_screening_question": screening,
        "question": question or phase2_question(),
        "label": {
            "steps": steps
            if steps is not None
            else [step(completion("Add.")), step(completion("$2+3=5$.\n\n# Answer\n\n5"))],
            "total_time": total_time,
            "finish_reason": finish_reason,
        },
    }


def line(data: dict[str, Any]) -> str:
    """A JSONL line as PRM800K writes it (json.dumps defaults), with its newline."""
    return json.dumps(data) + "\n"


def edge_case_records() -> list[dict[str, Any]]:
    """One record per edge case the round trip must survive, each at its own time."""
    records = _edge_cases()
    for minute, data in enumerate(records):
        if data["timestamp"] == DEFAULT_TIMESTAMP:
            data["timestamp"] = f"2022-11-22T16:{minute:02d}:29.980606"
    return records


DEFAULT_TIMESTAMP = "2022-11-22T16:51:29.980606"


def _edge_cases() -> list[dict[str, Any]]:
    problem = "Find $x$ if $3x+7=22$."
    pre = ["Subtract 7: $3x=15$.", "Divide: $x=5$.\n\n# Answer\n\n5"]
    q2 = phase2_question(problem, pre, answer="5", solution="$x=\\boxed{5}$", score=0.25)
    found_error = [
        step(completion(pre[0])),
        step(
            completion("Divide: $x=6$.", -1),
            completion("So $x = 5$.\n\n# Answer\n\n5", 1, False),
            completion("Hence $x=15/3$.", None, False),
            chosen=None,
        ),
    ]
    return [
        record(q2, [step(completion(pre[0])), step(completion(pre[1]))]),
        record(q2, found_error, labeler=LABELER_B, finish_reason="found_error"),
        record(q2, [step(completion(pre[0], 0))], finish_reason="give_up", total_time=None),
        record(q2, [], finish_reason="bad_problem", timestamp="2022-11-23T01:02:03.000004"),
        record(q2, found_error[:1], finish_reason=None, generation=None),
        record(
            phase1_question(problem, "5"),
            [
                step(completion("Let's subtract.", 1, False)),
                step(
                    completion("$3x = 29$", -1, False),
                    completion("$3x = 25$", -1, False),
                    human=human_completion("$3x=15$", corrected_rating=1),
                    chosen=None,
                ),
                step(
                    completion("$x=5$", 0, False),
                    completion("$x=5$\n\n# Answer\n\n5", 1, False),
                    chosen=1,
                ),
            ],
            generation=None,
            timestamp="2022-07-30T23:23:32.118856",
        ),
        record(phase1_question("Is $\\pi > 3$?", None), [step(completion("Yes.", 1, True))]),
        record(
            phase2_question(
                "Solve $a+b=3$.",
                ["$a=1$"],
                answer=None,
                solution=None,
                pre_generated_answer=None,
                score=None,
            ),
            [step(completion("$a=1$", 1))],
            generation=-1,
            screening=True,
        ),
        record(
            phase2_question(
                "Ünïcödé: what is $\\sqrt{4}$ — “two”?",
                ["√4 = 2 ✓\n\n# Answer\n\n2"],
                answer="2",
                solution="√4 = 2",
                pre_generated_answer="2",
                score=1e-05,
            ),
            [step(completion("√4 = 2 ✓\n\n# Answer\n\n2", 1, True))],
            qc=True,
        ),
        record(
            phase2_question(steps=None),
            [step(completion("Add.", 1), completion("", None))],
            total_time=0,
        ),
    ]


# Database rows


PASSWORD = "correct horse battery"
_PASSWORD_HASH = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash(PASSWORD)
"""The test users' password as argon2id at its lowest cost. The app verifies a hash by the
parameters stored in it: each login through the form costs a millisecond, not the 0.15 s
(up to a second on 2 busy cores) of the app's own hashes, which every account the app
creates still gets (``hash_password``)."""


def make_user(
    session: Session, name: str, *, role: Role = Role.LABELER, approved: bool = True
) -> User:
    """An active user whose password is PASSWORD."""
    user = User(name=name, role=role.value, password_hash=_PASSWORD_HASH, is_approved=approved)
    session.add(user)
    session.flush()
    return user


_problem_counter = itertools.count(1)


def make_solution(
    session: Session,
    steps: list[str] | None = None,
    *,
    generation: int | None = 0,
    queue_state: QueueState = QueueState.OPEN,
    overlap: int | None = None,
    alternatives: list[list[str]] | None = None,
    problem_text: str | None = None,
) -> Solution:
    """A queued solution of a fresh problem."""
    n = next(_problem_counter)
    text = problem_text or f"What is ${n} + {n}$?"
    problem = Problem(
        content_key=f"problem-{n}-{id(session)}",
        text_key=f"text-{n}",
        text=text,
        ground_truth_answer=str(2 * n),
    )
    session.add(problem)
    session.flush()
    solution = Solution(
        content_key=f"solution-{n}-{id(session)}",
        problem_id=problem.id,
        steps=steps or [f"Add ${n}$ and ${n}$.", f"So it is ${2 * n}$.\n\n# Answer\n\n{2 * n}"],
        answer=str(2 * n),
        generation=generation,
        queue_state=queue_state.value,
        overlap=overlap,
        alternatives=alternatives,
    )
    session.add(solution)
    session.flush()
    return solution


def make_label(
    session: Session,
    labeler: User,
    solution: Solution,
    ratings: list[list[int | None]],
    *,
    finish_reason: str | None = "solution",
    timestamp: datetime | None = None,
    total_time: int | None = 60_000,
    note: str | None = None,
    quality_control: bool = False,
) -> Label:
    """A label of ``solution``: one step per entry of ``ratings``, one rated completion per
    rating (the solution's own step first). Screening follows the solution's generation."""
    label = Label(
        dedupe_key=uuid.uuid4().hex,
        labeler_id=labeler.id,
        problem_id=solution.problem_id,
        solution_id=solution.id,
        timestamp=timestamp or datetime(2024, 1, 1, 12),
        generation=solution.generation,
        is_quality_control=quality_control,
        is_initial_screening=solution.generation == SCREENING_GENERATION,
        total_time=total_time,
        finish_reason=finish_reason,
        note=note,
        steps=[
            LabelStep(
                step_index=step_index,
                chosen_completion=None if step_ratings[0] == -1 else 0,
                completions=[
                    StepCompletion(
                        completion_index=index, text=f"step {step_index}.{index}", rating=rating
                    )
                    for index, rating in enumerate(step_ratings)
                ],
            )
            for step_index, step_ratings in enumerate(ratings)
        ],
    )
    session.add(label)
    session.flush()
    return label


def make_rated_label(
    session: Session,
    labeler: User,
    solution: Solution,
    ratings: list[int | None],
    *,
    finish_reason: str | None = None,
    generation: int | None = None,
    alternatives: list[int | None] | None = None,
    flagged: tuple[int, ...] = (),
    timestamp: datetime | None = None,
    **fields: Any,
) -> Label:
    """A label of ``solution`` rating its steps in order (completion 0 of each step).

    The finish reason defaults to what the ratings say in phase 2: ``found_error`` at a
    negative step, ``solution`` when every step is rated, else ``give_up``. ``alternatives``
    are the ratings of extra completions at the last step; ``flagged`` lists flagged steps.
    """
    steps = solution.steps or []
    if finish_reason is None:
        if -1 in ratings:
            finish_reason = "found_error"
        else:
            finish_reason = "solution" if len(ratings) == len(steps) else "give_up"
    label = Label(
        dedupe_key=uuid.uuid4().hex,
        labeler_id=labeler.id,
        problem_id=solution.problem_id,
        solution_id=solution.id,
        timestamp=timestamp or datetime(2024, 1, 1),
        generation=solution.generation if generation is None else generation,
        finish_reason=finish_reason,
        **fields,
    )
    for index, rating in enumerate(ratings):
        others = alternatives if alternatives and index == len(ratings) - 1 else []
        completions = [
            StepCompletion(
                completion_index=0, text=steps[index], rating=rating, flagged=index in flagged
            ),
            *(
                StepCompletion(completion_index=n, text=f"other {n}", rating=r, flagged=False)
                for n, r in enumerate(others, start=1)
            ),
        ]
        label.steps.append(
            LabelStep(
                step_index=index,
                chosen_completion=None if rating == -1 else 0,
                completions=completions,
            )
        )
    session.add(label)
    session.flush()
    return label


def estimate(value: float, low: float, high: float, n: int) -> dict[str, Any]:
    """A figure with its 95% interval, as the worker records it."""
    return {"value": value, "low": low, "high": high, "n": n}


def prm_evaluation(auroc: float = 0.712, f1: float = 0.412) -> dict[str, Any]:
    """One PRM's figures on a run's evaluation sets, in the worker's JSON (worker/assess.py)."""
    return {
        "sets": {
            "held_out_examples": 60,
            "held_out_problems": 12,
            "processbench_calibration": 240,
            "processbench_test": 240,
            "best_of_n_problems": 40,
            "imported_sample_problems": 0,
        },
        "step_auroc": {"status": "ok", **estimate(auroc, auroc - 0.052, auroc + 0.038, 12)},
        "processbench": {
            "threshold": 0.481,
            "f1": estimate(f1, f1 - 0.06, f1 + 0.055, 240),
            "subsets": {
                "gsm8k": {
                    "f1": estimate(f1 + 0.05, f1 - 0.03, f1 + 0.12, 120),
                    "accuracy_erroneous": 0.35,
                    "accuracy_correct": 0.71,
                    "erroneous": 60,
                    "correct": 60,
                },
                "math": {
                    "f1": None,
                    "accuracy_erroneous": None,
                    "accuracy_correct": 0.66,
                    "erroneous": 0,
                    "correct": 120,
                },
            },
        },
        "best_of_n": {
            "status": "ok",
            "problems": 40,
            "mean_n": 8.0,
            "prm": estimate(0.625, 0.475, 0.775, 40),
            "majority": estimate(0.55, 0.4, 0.7, 40),
            "random": estimate(0.41, 0.33, 0.49, 40),
        },
        "best_of_n_imported": None,
        "tokens_per_second": 5120.5,
        "sequences_computed": 860,
    }


def prm_run_metrics(auroc: float = 0.712, current_auroc: float | None = 0.7) -> dict[str, Any]:
    """A whole run's metrics, as the worker writes them (worker/cycle.py); the current
    model's figures on the same sets with ``current_auroc``, none for a first model."""
    metrics: dict[str, Any] = {
        "graded": 3,
        "examples": 240,
        "labels": 200,
        "labels_trained": 180,
        "labels_held_out": 20,
        "split": {
            "identity": "problem-hash/1 seed=0 held_out=0.2",
            "seed": 0,
            "held_out_fraction": 0.2,
        },
        "evaluation_left_out": [
            {
                "set": "best_of_n",
                "unit": "problems",
                "count": 3,
                "reason": "a problem this run's PRM trained on",
            }
        ],
        "training_args": {
            "base_model": "models/smollm2-135m",
            "mode": "head",
            "backbone_depth": 0.5,
            "learning_rate": 0.001,
            "epochs": 3,
            "batch_size": 16,
            "max_length": 2048,
            "weight_decay": 0.01,
            "warmup_ratio": 0.05,
            "gradient_checkpointing": False,
            "bf16": None,
            "seed": 0,
            "held_out_fraction": 0.2,
        },
        "train": {
            "examples": 190,
            "labeled_steps": 812,
            "optimizer_steps": 153,
            "epochs": 3,
            "tokens": 150_000,
            "seconds": 42.5,
            "tokens_per_second": 18_130.2,
            "epoch_losses": [0.912, 0.641, 0.523],
            "stopped": False,
            "feature_seconds": 30.1,
            "feature_sequences": 240,
        },
        "evaluation": prm_evaluation(auroc),
        "checkpoint_bytes": 540_000_000,
        "gate": {"promote": True, "reason": "first model", "metric": None},
        "pruned_checkpoints": [],
        "pool": {"pool": 900, "wrong_answer_candidates": 300, "ungraded": 12},
        "pace": {
            "due": False,
            "reason": "generation 3 is 40% labeled; the next is queued at 80%",
            "open_generation": 3,
            "share_done": 0.4,
        },
        "selection": {
            "queued": 0,
            "reason": "generation 3 is 40% labeled; the next is queued at 80%",
        },
    }
    if current_auroc is not None:
        metrics["current_on_this_evaluation"] = prm_evaluation(current_auroc, f1=0.398)
        new = estimate(auroc, auroc - 0.052, auroc + 0.038, 12)
        current = estimate(current_auroc, current_auroc - 0.052, current_auroc + 0.038, 12)
        gap = auroc - current_auroc
        difference = estimate(gap, gap - 0.02, gap + 0.02, 12)
        verdict = "promoted" if gap >= 0 else "kept the current model"
        metrics["gate"] = {
            "promote": gap >= 0,
            "reason": f"{verdict}: step_auroc {_shown(new)} against {_shown(current)} "
            f"(difference {_shown(difference, '+')})",
            "metric": "step_auroc",
            "new": new,
            "current": current,
            "difference": difference,
            "primary": "step_auroc",
            "margin": 0.02,
            "judged": [
                {
                    "metric": "step_auroc",
                    "new": new,
                    "current": current,
                    "difference": difference,
                    "passed": gap >= 0,
                    "verdict": "not worse beyond the margin 0.020"
                    if gap >= 0
                    else "below the current model's",
                }
            ],
            "not_judged": {"best_of_n": "no best-of-N samples"},
            "error": None,
        }
    return metrics


def _shown(figure: dict[str, Any], sign: str = "") -> str:
    """An estimate as the worker's gate writes it: ``0.712 [0.660, 0.750]``."""
    value, low, high = (f"{figure[key]:{sign}.3f}" for key in ("value", "low", "high"))
    return f"{value} [{low}, {high}]"


def login_of(user: User) -> Login:
    """The login a request of ``user`` carries, as the labeling service takes it."""
    session = object_session(user)
    if session is not None:
        session.flush()  # the service reads the user's row: what the test changed first
    return Login(user.id, user.session_version, {})


def next_lease(
    connection: Connection,
    user: User,
    rules: QueueRules,
    now: datetime | None = None,
    rng: random.Random | None = None,
) -> Lease | None:
    """The user's task as the labeling page takes it (``service.next_lease``)."""
    return service.next_lease(connection, login_of(user), now or utc_now(), rules, rng)[1]


def task_of(connection: Connection, user: User, lease: Lease) -> LeasedTask:
    """The task ``lease`` holds, as a submit of ``user`` finds it."""
    _, task = repository.labeler_and_task(connection, user.id, lease.id)
    assert task is not None
    return task
