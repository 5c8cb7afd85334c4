"""Training data from the labels: PRM800K records turned into step-labeled examples.

The records come from the exporter (app/datasets/export.py), the one place that reads
labels back, so the worker learns from exactly what ``steplabel export`` writes.

Each label gives the path the labeler took, up to and including its first negative step:
at each step the chosen completion, or the labeler's own step (counted positive), or the
negative completion where the path ends. Every other rated completion of a step becomes a
branch of its own: the path so far, unlabeled (context only), plus that completion and its
rating. So each rating a labeler gave is learned once, however many branches share a prefix.
"""

from collections.abc import Iterator
from typing import Any

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.datasets.export import ExportFilter, consensus_records, solution_records
from app.models import FinishReason
from worker import repository
from worker.split import LabelExamples, split_key
from worker.train import Example

LEFT_OUT = {FinishReason.GIVE_UP.value, FinishReason.BAD_PROBLEM.value}
"""Labels that do not judge the solution's steps."""


def examples_from_record(record: dict[str, Any]) -> Iterator[Example]:
    """The path example and the branch examples of one PRM800K record."""
    problem = record["question"]["problem"]
    group = split_key(problem)  # records carry the text, not the row id
    texts: list[str] = []
    ratings: list[int | None] = []
    for step in record["label"]["steps"]:
        taken = _taken(step)
        context: list[int | None] = [None] * len(texts)
        for index, completion in enumerate(step["completions"] or []):
            if index != taken and completion["rating"] is not None:
                yield Example(
                    group, problem, [*texts, completion["text"]], [*context, completion["rating"]]
                )
        if taken is None and step["human_completion"] is not None:
            human = step["human_completion"]
            texts.append(human["text"])
            ratings.append(1 if human["rating"] is None else human["rating"])
            continue
        if taken is None or step["completions"][taken]["rating"] is None:
            break
        rating = step["completions"][taken]["rating"]
        texts.append(step["completions"][taken]["text"])
        ratings.append(rating)
        if rating < 0:
            break
    if texts:
        yield Example(group, problem, texts, ratings)


def _taken(step: dict[str, Any]) -> int | None:
    """The completion the path goes on with: the chosen one, else the first negative."""
    if step["chosen_completion"] is not None:
        chosen: int = step["chosen_completion"]
        return chosen
    if step["human_completion"] is not None:
        return None
    ratings = [completion["rating"] for completion in step["completions"] or []]
    return ratings.index(-1) if -1 in ratings else None


def training_labels(session: Session, settings: Settings) -> list[LabelExamples]:
    """Every judged label's training examples (or, with ``train_labels=consensus``, every
    solution's consensus label's), and whether a PRM chose its solution."""
    label_filter = ExportFilter(
        include_quality_control=settings.train_include_quality_control,
        include_screening=settings.train_include_screening,
    )
    chosen = set(session.scalars(repository.chosen_by_prm()))
    records = (
        consensus_records(session, label_filter)
        if settings.train_labels == "consensus"
        else solution_records(session, label_filter)
    )
    labels = []
    for solution_id, record in records:
        if record["label"]["finish_reason"] in LEFT_OUT:
            continue
        problem = record["question"]["problem"]
        examples = list(examples_from_record(record))
        labels.append(LabelExamples(split_key(problem), problem, examples, solution_id in chosen))
    return labels
