"""Small typed builders of test data: PRM800K lines and their parts."""

import json
from typing import Any

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
