"""The PRM800K record: one Pydantic model of the JSONL schema, and its mapping to the tables.

A line looks like ``{labeler, timestamp, generation, is_quality_control_question,
is_initial_screening_question, question, label}``. Quirks of the real data that the model
accepts (see shared/data/SOURCES.md): phase-1 questions hold only ``problem`` and
``ground_truth_answer``; ratings, ``flagged``, ``chosen_completion``, ``human_completion``,
a step's ``completions`` (phase 1, where a labeler gave up) and most question fields can be
null; ``human_completion`` is an object.

Export builds plain dicts in the same key order as the models (json.dumps of them gives back
the original bytes); a test checks that every exported dict validates against ``Record``.
Import refuses a line that export would not give back as written: keys in another order or
a value written otherwise than export writes it (``export_difference``), or a value the
tables cannot tell from another (an empty list of completions is stored as no rows, as null
is). So a line that ``json.dumps`` wrote, as PRM800K's were, exports byte for byte.
"""

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Strict,
    Tag,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from app.columns import StoredFloat, fits
from app.models import LABEL_STEPS, LABELS, SOLUTIONS, FinishReason, TaskStyle

# A strict int, so that JSON true is rejected rather than read as +1.
Rating = Annotated[int, Field(ge=-1, le=1)]
EXTERNAL_ID = "external_id"
"""steplabel's side field on an exported line (``Record.external_id``)."""
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


class _Strict(BaseModel):
    # Strict: a rating of true or "1" is an error, not a silent conversion. NaN and
    # Infinity are not JSON numbers: export could not write them back.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class Completion(_Strict):
    text: str
    rating: Rating | None
    flagged: bool | None


class HumanCompletion(BaseModel):
    """A step the labeler wrote; real lines may carry extra keys such as ``corrected_rating``.

    Stored as the object it was read as, its keys in their order (``as_json``).
    """

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, allow_inf_nan=False)
    __pydantic_extra__: dict[str, JsonValue]

    text: str
    rating: Rating | None
    source: str
    flagged: bool | None
    _key_order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_key_order(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        completion = handler(value)
        if isinstance(value, dict):
            completion._key_order = tuple(value)
        return completion

    def as_json(self) -> dict[str, Any]:
        values = self.model_dump()
        return {key: values[key] for key in self._key_order or values}


class Step(_Strict):
    completions: list[Completion] | None
    human_completion: HumanCompletion | None
    chosen_completion: Annotated[int, fits(LABEL_STEPS.c.chosen_completion)] | None

    @field_validator("completions")
    @classmethod
    def _not_empty(cls, completions: list[Completion] | None) -> list[Completion] | None:
        # A step's completions are rows; no rows export as null, PRM800K's "no completions".
        if completions == []:
            raise ValueError("an empty list is stored as null and would export as null")
        return completions

    @model_validator(mode="after")
    def _chosen_exists(self) -> "Step":
        chosen = self.chosen_completion
        count = len(self.completions or [])
        if chosen is not None and not 0 <= chosen < count:
            raise ValueError(
                f"chosen_completion {chosen} is out of range for "
                + ("completions null" if self.completions is None else f"{count} completions")
            )
        return self


class LabelBody(_Strict):
    steps: list[Step]
    total_time: Annotated[int, fits(LABELS.c.total_time)] | None
    # Not strict: import validates decoded JSON, where a strict enum wants an enum object.
    finish_reason: Annotated[FinishReason, Strict(False)] | None


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
    pre_generated_verifier_score: StoredFloat | None


_PHASE2_ONLY = frozenset(Phase2Question.model_fields) - frozenset(Phase1Question.model_fields)


def _question_phase(value: Any) -> str:
    # Any key only phase 2 has makes it phase 2, so a missing one is reported as missing.
    if isinstance(value, dict):
        return "phase2" if _PHASE2_ONLY.intersection(value) else "phase1"
    return "phase2" if isinstance(value, Phase2Question) else "phase1"


Question = Annotated[
    Annotated[Phase2Question, Tag("phase2")] | Annotated[Phase1Question, Tag("phase1")],
    Discriminator(_question_phase),
]


CONSENSUS_KEY = "steplabel_consensus"
"""The side field of the consensus export's lines (app/consensus/): their provenance. Such a
line is no labeler's label, and import refuses it."""


class Record(_Strict):
    """One line of PRM800K: one labeler's labels for one question."""

    labeler: Annotated[str, Field(pattern=UUID_PATTERN)]
    # Not strict, as finish_reason; export_difference refuses any form but isoformat's.
    timestamp: Annotated[datetime, Strict(False)]
    generation: Annotated[int, fits(LABELS.c.generation)] | None
    is_quality_control_question: bool
    is_initial_screening_question: bool
    question: Question
    label: LabelBody
    external_id: Annotated[str, fits(SOLUTIONS.c.source_id)] | None = None
    """steplabel's side field, not PRM800K's: the labeled solution's id in the team's own
    pipeline (``id`` or ``external_id`` of its import line). Written last, and only when
    the solution has one, so that every other line stays PRM800K's bytes; PRM800K readers,
    which read the keys they know, pass over it."""

    @model_serializer(mode="wrap")
    def _side_field_only_when_set(self, handler: SerializerFunctionWrapHandler) -> Any:
        # As export writes the line: no side field where the solution has no external id.
        data = handler(self)
        if isinstance(data, dict) and data.get(EXTERNAL_ID, "") is None:
            del data[EXTERNAL_ID]
        return data

    @model_validator(mode="before")
    @classmethod
    def _not_a_consensus_line(cls, data: Any) -> Any:
        # Said plainly: "Extra inputs are not permitted" would not tell what the file is.
        if isinstance(data, dict) and CONSENSUS_KEY in data:
            raise ValueError(
                f"a line of the consensus export ({CONSENSUS_KEY}): a consensus is not a "
                "labeler's label, so it is not imported; import the per-label export"
            )
        return data

    @model_validator(mode="after")
    def _naive_timestamp(self) -> "Record":
        if self.timestamp.tzinfo is not None:
            raise ValueError("timestamp must be naive UTC, as PRM800K writes it")
        return self


def export_difference(record: Record, written: dict[str, Any]) -> str | None:
    """Where export would not give back ``written``, the decoded line ``record`` came from.

    ``path: what``, or None. Validation has matched every key and value, so what is left to
    differ is the order of keys, which export writes as the models declare them (a human
    completion keeps its own), and values stored otherwise than written: a timestamp not in
    isoformat's form, a score of 1 (stored as 1.0) or -0.0.
    """
    question, label = written["question"], written["label"]
    misplaced = (
        _misplaced_key("", written, Record, _record_order(written))
        or _misplaced_key("question", question, type(record.question))
        or _misplaced_key("label", label, LabelBody)
    )
    if misplaced:
        return misplaced
    step_order, completion_order = _KEY_ORDER[Step], _KEY_ORDER[Completion]
    for i, step in enumerate(label["steps"]):
        if tuple(step) != step_order:
            return _misplaced_key(f"label.steps.{i}", step, Step)
        for j, completion in enumerate(step["completions"] or ()):
            if tuple(completion) != completion_order:
                return _misplaced_key(f"label.steps.{i}.completions.{j}", completion, Completion)
    values = [("timestamp", written["timestamp"], record.timestamp.isoformat())]
    if isinstance(record.question, Phase2Question):
        score = "pre_generated_verifier_score"
        values.append((f"question.{score}", question[score], getattr(record.question, score)))
    for path, as_written, as_stored in values:
        # repr tells 1 from 1.0 and -0.0 from 0.0, as JSON does, at less cost than dumps.
        if repr(as_written) != repr(as_stored):
            return f"{path}: {json.dumps(as_written)} would be exported as {json.dumps(as_stored)}"
    return None


_KEY_ORDER: dict[type[BaseModel], tuple[str, ...]] = {
    model: tuple(model.model_fields)
    for model in (Record, Phase1Question, Phase2Question, LabelBody, Step, Completion)
}


def _record_order(written: dict[str, Any]) -> tuple[str, ...]:
    """A line's keys as export writes them: the side field only where there is one."""
    order = _KEY_ORDER[Record]
    return order if EXTERNAL_ID in written else order[:-1]


def _misplaced_key(
    path: str,
    written: dict[str, Any],
    model: type[BaseModel],
    order: tuple[str, ...] | None = None,
) -> str | None:
    order = order or _KEY_ORDER[model]
    if tuple(written) == order:
        return None
    key = next(key for key, found in zip(order, written, strict=True) if key != found)
    where = f"{path}.{key}" if path else key
    return f"{where}: out of order; export writes {', '.join(order)}"


def parse_line(line: str | bytes) -> Record:
    """Validate one JSONL line; raises pydantic.ValidationError."""
    return Record.model_validate_json(line)


# Export: plain dicts in schema order, fast enough to stream hundreds of MB.


def completion_dict(text: str, rating: int | None, flagged: bool | None) -> dict[str, Any]:
    return {"text": text, "rating": rating, "flagged": flagged}


def step_dict(
    completions: list[dict[str, Any]] | None,
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
    external_id: str | None = None,
) -> dict[str, Any]:
    record = {
        "labeler": labeler,
        "timestamp": timestamp.isoformat(),
        "generation": generation,
        "is_quality_control_question": is_quality_control,
        "is_initial_screening_question": is_initial_screening,
        "question": question,
        "label": label_dict(steps, total_time, finish_reason),
    }
    if external_id is not None:
        record[EXTERNAL_ID] = external_id
    return record


def label_dict(
    steps: list[dict[str, Any]], total_time: int | None, finish_reason: str | None
) -> dict[str, Any]:
    return {"steps": steps, "total_time": total_time, "finish_reason": finish_reason}


def steps_of_rows(
    steps: list[dict[str, Any]], completions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """PRM800K's steps from a label's ``label_steps`` and ``step_completions`` rows (their
    columns as dicts), as export reads them: a step without completion rows has null."""
    by_step: dict[int, list[dict[str, Any]]] = {}
    for row in sorted(completions, key=lambda row: (row["step_index"], row["completion_index"])):
        by_step.setdefault(row["step_index"], []).append(
            completion_dict(row["text"], row["rating"], row["flagged"])
        )
    return [
        step_dict(by_step.get(row["step_index"]), row["human_completion"], row["chosen_completion"])
        for row in sorted(steps, key=lambda row: row["step_index"])
    ]


# json.dumps builds a new encoder on every call that passes an option; one, made once,
# writes the same bytes without that cost on each of millions of lines.
_ENCODE = json.JSONEncoder(allow_nan=False).encode


def dumps(record: dict[str, Any]) -> str:
    """One JSONL line, with the default settings PRM800K was written with; strict JSON."""
    return _ENCODE(record)


# Stored text: a line's two large parts, encoded once when their rows are written
# (labels.prm800k_label, solutions.prm800k_question) and spliced into the line at export.
# The rest of a line, a few short values, is encoded at export from the columns, so that
# it is always what the rows say now.


def label_text(
    steps: list[dict[str, Any]], total_time: int | None, finish_reason: str | None
) -> str:
    """A line's ``label`` as JSON text, as ``dumps`` writes it within the line."""
    return _ENCODE(label_dict(steps, total_time, finish_reason))


def pre_generated_of(
    style: str, steps: list[str] | None, answer: str | None, verifier_score: float | None
) -> tuple[list[str] | None, str | None, float | None] | None:
    """A solution's ``pre_generated`` part of its question: none for a phase-1 task, whose
    labels show the question as phase 1 did (app/datasets/export.py)."""
    return None if TaskStyle(style) is TaskStyle.PHASE1 else (steps, answer, verifier_score)


def question_text(
    problem: str,
    ground_truth_solution: str | None,
    ground_truth_answer: str | None,
    pre_generated: tuple[list[str] | None, str | None, float | None] | None,
) -> str | None:
    """A line's ``question`` as JSON text (``question_dict``'s arguments); None where it
    holds a score JSON cannot write (the line is then refused at export, with a message)."""
    try:
        return _ENCODE(
            question_dict(problem, ground_truth_solution, ground_truth_answer, pre_generated)
        )
    except ValueError:
        return None


def record_label_text(record: Record) -> str:
    """``label_text`` of an imported record: what export builds from its rows."""
    steps = [
        step_dict(
            None
            if step.completions is None
            else [completion_dict(c.text, c.rating, c.flagged) for c in step.completions],
            step.human_completion.as_json() if step.human_completion else None,
            step.chosen_completion,
        )
        for step in record.label.steps
    ]
    reason = record.label.finish_reason
    return label_text(steps, record.label.total_time, None if reason is None else reason.value)


def line_text(
    *,
    labeler: str,
    timestamp: datetime,
    generation: int | None,
    is_quality_control: bool,
    is_initial_screening: bool,
    question: str,
    label: str,
    external_id: str | None,
) -> str:
    """``dumps(record_dict(...))`` and a newline, byte for byte, from the question's and
    the label's JSON text (``question_text``, ``label_text``)."""
    end = "}\n" if external_id is None else f', "{EXTERNAL_ID}": {_string(external_id)}}}\n'
    return (
        f'{{"labeler": {_string(labeler)}, "timestamp": "{timestamp.isoformat()}", '
        f'"generation": {"null" if generation is None else int(generation)}, '
        f'"is_quality_control_question": {_boolean(is_quality_control)}, '
        f'"is_initial_screening_question": {_boolean(is_initial_screening)}, '
        f'"question": {question}, "label": {label}{end}'
    )


# What the encoder itself writes for a string (ensure_ascii, the default) and a boolean,
# without its per-call dispatch on 50,000 short values per 10,000 lines.
_string = json.encoder.encode_basestring_ascii


def _boolean(value: bool) -> str:
    return "true" if value else "false"


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
        "prm800k_label": record_label_text(record),
        # A line with a solution gives the solution its id; one without keeps it here.
        "source_id": record.external_id if solution_id is None else None,
    }


def step_rows(record: Record, label_id: int) -> list[dict[str, Any]]:
    """The ``label_steps`` rows of a record."""
    return [
        {
            "label_id": label_id,
            "step_index": index,
            "chosen_completion": step.chosen_completion,
            "human_completion": (
                step.human_completion.as_json() if step.human_completion else None
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
        for completion_index, completion in enumerate(step.completions or [])
    ]
