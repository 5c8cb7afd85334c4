"""The PRM800K record: one Pydantic model of the JSONL schema, and its mapping to the tables.

A line looks like ``{labeler, timestamp, generation, is_quality_control_question,
is_initial_screening_question, question, label}``. Quirks of the real data that the model
accepts (see shared/data/SOURCES.md): phase-1 questions hold only ``problem`` and
``ground_truth_answer``; ratings, ``flagged``, ``chosen_completion``, ``human_completion``
and most question fields can be null; ``human_completion`` is an object.

Export builds plain dicts in the same key order as the models (json.dumps of them gives back
the original bytes); a test checks that every exported dict validates against ``Record``.
"""

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from app.models import FinishReason

# A strict int, so that JSON true is rejected rather than read as +1.
Rating = Annotated[int, Field(ge=-1, le=1)]
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


class _Strict(BaseModel):
    # Strict: a rating of true or "1" is an error, not a silent conversion.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Completion(_Strict):
    text: str
    rating: Rating | None
    flagged: bool | None


class HumanCompletion(BaseModel):
    """A step the labeler wrote; real lines may carry extra keys such as ``corrected_rating``."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    text: str
    rating: Rating | None
    source: str
    flagged: bool | None


class Step(_Strict):
    completions: list[Completion]
    human_completion: HumanCompletion | None
    chosen_completion: int | None

    @model_validator(mode="after")
    def _chosen_exists(self) -> "Step":
        chosen = self.chosen_completion
        if chosen is not None and not 0 <= chosen < len(self.completions):
            raise ValueError(
                f"chosen_completion {chosen} is out of range for "
                f"{len(self.completions)} completions"
            )
        return self


class LabelBody(_Strict):
    steps: list[Step]
    total_time: int | None
    finish_reason: FinishReason | None


class Phase1Question(_Strict):
    """Phase 1: steps were sampled live, so nothing was pre-generated."""

    problem: str
    ground_truth_answer: str | None


class Phase2Question(_Strict):
    """Phase 2: a whole pre-generated solution was labeled step by step."""

    problem: str
    ground_truth_solution: str | None
    ground_truth_answer: str | None
    pre_generated_steps: list[str] | None
    pre_generated_answer: str | None
    pre_generated_verifier_score: float | None


def _question_phase(value: Any) -> str:
    if isinstance(value, dict):
        return "phase2" if "pre_generated_steps" in value else "phase1"
    return "phase2" if hasattr(value, "pre_generated_steps") else "phase1"


Question = Annotated[
    Annotated[Phase2Question, Tag("phase2")] | Annotated[Phase1Question, Tag("phase1")],
    Discriminator(_question_phase),
]


class Record(_Strict):
    """One line of PRM800K: one labeler's labels for one question."""

    labeler: Annotated[str, Field(pattern=UUID_PATTERN)]
    timestamp: datetime
    generation: int | None
    is_quality_control_question: bool
    is_initial_screening_question: bool
    question: Question
    label: LabelBody

    @model_validator(mode="after")
    def _naive_timestamp(self) -> "Record":
        if self.timestamp.tzinfo is not None:
            raise ValueError("timestamp must be naive UTC, as PRM800K writes it")
        return self


def parse_line(line: str | bytes) -> Record:
    """Validate one JSONL line; raises pydantic.ValidationError."""
    return Record.model_validate_json(line)


# Export: plain dicts in schema order, fast enough to stream hundreds of MB.


def completion_dict(text: str, rating: int | None, flagged: bool | None) -> dict[str, Any]:
    return {"text": text, "rating": rating, "flagged": flagged}


def step_dict(
    completions: list[dict[str, Any]],
    human_completion: dict[str, Any] | None,
    chosen_completion: int | None,
) -> dict[str, Any]:
    return {
        "completions": completions,
        "human_completion": human_completion,
        "chosen_completion": chosen_completion,
    }


def question_dict(
    problem: str,
    ground_truth_solution: str | None,
    ground_truth_answer: str | None,
    pre_generated: tuple[list[str] | None, str | None, float | None] | None,
) -> dict[str, Any]:
    """``pre_generated`` is (steps, answer, verifier score) in phase 2, None in phase 1."""
    if pre_generated is None:
        return {"problem": problem, "ground_truth_answer": ground_truth_answer}
    steps, answer, score = pre_generated
    return {
        "problem": problem,
        "ground_truth_solution": ground_truth_solution,
        "ground_truth_answer": ground_truth_answer,
        "pre_generated_steps": steps,
        "pre_generated_answer": answer,
        "pre_generated_verifier_score": score,
    }


def record_dict(
    *,
    labeler: str,
    timestamp: datetime,
    generation: int | None,
    is_quality_control: bool,
    is_initial_screening: bool,
    question: dict[str, Any],
    steps: list[dict[str, Any]],
    total_time: int | None,
    finish_reason: str | None,
) -> dict[str, Any]:
    return {
        "labeler": labeler,
        "timestamp": timestamp.isoformat(),
        "generation": generation,
        "is_quality_control_question": is_quality_control,
        "is_initial_screening_question": is_initial_screening,
        "question": question,
        "label": {"steps": steps, "total_time": total_time, "finish_reason": finish_reason},
    }


def dumps(record: dict[str, Any]) -> str:
    """One JSONL line, with the default settings PRM800K was written with."""
    return json.dumps(record)


# Import: a validated Record as rows of the label tables.


def pre_generated(record: Record) -> tuple[list[str] | None, str | None, float | None] | None:
    """(steps, answer, verifier score) of a phase-2 question; None in phase 1."""
    question = record.question
    if isinstance(question, Phase1Question):
        return None
    return (
        question.pre_generated_steps,
        question.pre_generated_answer,
        question.pre_generated_verifier_score,
    )


def label_row(
    record: Record, *, dedupe_key: str, labeler_id: int, problem_id: int, solution_id: int | None
) -> dict[str, Any]:
    """The ``labels`` row of a record."""
    return {
        "dedupe_key": dedupe_key,
        "labeler_id": labeler_id,
        "problem_id": problem_id,
        "solution_id": solution_id,
        "timestamp": record.timestamp,
        "generation": record.generation,
        "is_quality_control": record.is_quality_control_question,
        "is_initial_screening": record.is_initial_screening_question,
        "total_time": record.label.total_time,
        "finish_reason": record.label.finish_reason,
    }


def step_rows(record: Record, label_id: int) -> list[dict[str, Any]]:
    """The ``label_steps`` rows of a record."""
    return [
        {
            "label_id": label_id,
            "step_index": index,
            "chosen_completion": step.chosen_completion,
            "human_completion": (
                step.human_completion.model_dump() if step.human_completion else None
            ),
        }
        for index, step in enumerate(record.label.steps)
    ]


def completion_rows(record: Record, label_id: int) -> list[dict[str, Any]]:
    """The ``step_completions`` rows of a record: every rated candidate of every step."""
    return [
        {
            "label_id": label_id,
            "step_index": step_index,
            "completion_index": completion_index,
            "text": completion.text,
            "rating": completion.rating,
            "flagged": completion.flagged,
        }
        for step_index, step in enumerate(record.label.steps)
        for completion_index, completion in enumerate(step.completions)
    ]
