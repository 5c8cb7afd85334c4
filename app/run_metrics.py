"""What a training run measures (``TrainingRun.metrics``): one typed record, written by the
worker (worker/cycle.py) and read by the PRM pages (app/admin/prm.py).

The models mirror the stored JSON key for key (an alias where a key is no Python name), so
what the worker writes is what the pages read. Failed runs, runs skipped for too few labels
and runs of older workers lack parts of it, and old rows may hold odd values: every field
is optional, and a value of the wrong type reads as the field's default (an item of the
wrong type in a list or mapping is dropped), so reading never raises on old rows.
"""

from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
)

BEST_OF_N_SETS = {
    "best_of_n": "independent samples",
    "best_of_n_imported": "imported samples",
}
"""The best-of-N sets an evaluation may have, in the order the pages prefer them."""

STORED = "stored"
"""Serialization context: the JSON goes into ``TrainingRun.metrics`` (``Record.record``)."""


class Record(BaseModel):
    """A part of the record: strict types (a bool is no number, "3" no int), and a field
    whose stored value does not fit reads as its default; a required one fails the part."""

    model_config = ConfigDict(strict=True, populate_by_name=True, extra="ignore")

    @field_validator("*", mode="wrap")
    @classmethod
    def _default_if_malformed(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        try:
            return handler(value)
        except ValidationError:
            field = cls.model_fields[info.field_name or ""]
            if field.is_required():
                raise
            return field.get_default(call_default_factory=True)

    def record(self) -> dict[str, Any]:
        """The stored JSON: the stored key names, and only the fields that were set."""
        return self.model_dump(
            mode="json", by_alias=True, exclude_unset=True, context={STORED: True}
        )


class Reported(Record):
    """Figures that may be missing, with a status: "ok" where they are there, else why not."""

    status: str | None = None
    """"ok", or why there is no figure ("not enough data: ...")."""

    @property
    def why_none(self) -> str | None:
        """Why there is no figure; None where there is one."""
        return None if self.status in (None, "ok") else self.status

    @model_serializer(mode="wrap")
    def _shown(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        # The record keeps the worker's "ok"; the JSON API has always said why or null.
        data = handler(self)
        if not (info.context or {}).get(STORED) and isinstance(data, dict) and "status" in data:
            data["status"] = self.why_none
        return data


def _fits(adapter: TypeAdapter[Any], value: Any) -> bool:
    try:
        adapter.validate_python(value, strict=True)
    except ValidationError:
        return False
    return True


def _items_that_fit(item: Any) -> BeforeValidator:
    adapter: TypeAdapter[Any] = TypeAdapter(item)

    def keep(value: Any) -> Any:
        if isinstance(value, list):
            return [v for v in value if _fits(adapter, v)]
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if _fits(adapter, v)}
        return value

    return BeforeValidator(keep)


Plain = str | int | float | bool | None
"""A value the pages show as it is (lists and objects of the record are not shown)."""


class Figure(Reported):
    """A recorded estimate: a figure and its 95% bootstrap interval over ``n`` units
    (app/estimates.py ``Estimate`` as stored), or why there is none."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    """Problems or solutions the figure (and its resamples) is computed over."""


def _figure_or_none(data: Any) -> Any:
    if not isinstance(data, dict):
        return None
    value, status = data.get("value"), data.get("status")
    has_value = isinstance(value, int | float) and not isinstance(value, bool)
    has_reason = isinstance(status, str) and status != "ok"
    return data if has_value or has_reason else None


FigureOrNone = Annotated[Figure | None, BeforeValidator(_figure_or_none)]
_FIGURE: TypeAdapter[Figure | None] = TypeAdapter(FigureOrNone)


def read_figure(data: Any) -> Figure | None:
    """A stored estimate; None for one that has neither a value nor a reason."""
    return _FIGURE.validate_python(data)


class BestOfN(Reported):
    """Per problem, whether the solution the PRM scores highest is right, beside a
    majority vote and a random pick among the same samples."""

    problems: int | None = None
    mean_n: float | None = None
    """Samples per problem, on average."""
    prm: FigureOrNone = None
    majority: FigureOrNone = None
    random: FigureOrNone = None


class SubsetFigures(Record):
    """ProcessBench figures on one subset (gsm8k, math, ...) of its test part."""

    f1: FigureOrNone = None
    accuracy_erroneous: float | None = None
    """Share of the solutions with an error whose first error the PRM puts at its step."""
    accuracy_correct: float | None = None
    """Share of the solutions without an error that the PRM finds no error in."""
    erroneous: int | None = None
    correct: int | None = None


class ProcessBench(Record):
    threshold: float | None = None
    """The step score below which a step counts as the first error, chosen on the
    calibration part, never on the test part judged here."""
    f1: FigureOrNone = None
    """The mean F1 over the subsets."""
    subsets: Annotated[dict[str, SubsetFigures], _items_that_fit(SubsetFigures)] = Field(
        default_factory=dict
    )


class Evaluation(Record):
    """One PRM's figures on one run's evaluation sets."""

    sets: Annotated[dict[str, int], _items_that_fit(int)] = Field(default_factory=dict)
    """Size of each set (held-out examples and problems, ProcessBench parts, ...)."""
    step_auroc: FigureOrNone = None
    processbench: ProcessBench | None = None
    best_of_n: BestOfN | None = None
    """On the independent samples (the evaluation files)."""
    best_of_n_imported: BestOfN | None = None
    """On the imported samples."""
    tokens_per_second: float | None = None
    sequences_computed: int | None = None

    @property
    def best_of_n_sets(self) -> dict[str, BestOfN]:
        """Each best-of-N set evaluated, by the samples it is on, in BEST_OF_N_SETS' order."""
        sets = {samples: getattr(self, key) for key, samples in BEST_OF_N_SETS.items()}
        return {samples: figures for samples, figures in sets.items() if figures is not None}


class Judgement(Record):
    """One metric the gate judged: both PRMs' figures, their difference, the verdict."""

    metric: str = ""
    new: FigureOrNone = None
    current: FigureOrNone = None
    difference: FigureOrNone = None
    passed: bool = False
    verdict: str = ""


class Gate(Record):
    """Whether the run's PRM replaced the current one, and on which figures."""

    promote: bool
    reason: str = ""
    metric: str | None = None
    """The metric that decided: the first that failed, else the primary one."""
    new: FigureOrNone = None
    current: FigureOrNone = None
    difference: FigureOrNone = None
    """New minus current on the same units (a paired bootstrap)."""
    primary: str | None = None
    margin: float | None = None
    judged: Annotated[list[Judgement], _items_that_fit(Judgement)] = Field(default_factory=list)
    not_judged: Annotated[dict[str, str], _items_that_fit(str)] = Field(default_factory=dict)
    """Metrics the gate could not compare, and why."""
    error: str | None = None
    """Why the gate could not compare at all (the current checkpoint is missing)."""


class Split(Record):
    """Which problems a run held out: its identity, seed and share (worker/split.py)."""

    identity: str
    seed: int | None = None
    held_out_fraction: float | None = None


class LeftOut(Record):
    """Items an evaluation set lost, and why (a problem trained on, say)."""

    set: str
    unit: str = ""
    count: int
    reason: str


class Pace(Record):
    """Whether the labelers were far enough into the open generation for a new one
    (worker/repository.py ``generation_pace``)."""

    due: bool | None = None
    reason: str | None = None
    open_generation: int | None = None
    share_done: float | None = None


class Selection(Record):
    """What the run's active-learning selection queued."""

    strategy: str | None = None
    queued: int | None = None
    wrong_share: float | None = Field(None, alias="yield")
    """Share of wrong final answers among the strategy's picks (graded ones)."""
    pool_wrong_share: float | None = None
    """The same share over the whole pool: what a uniform pick would have yielded."""
    reason: str | None = None
    rule: str | None = None
    """Why the pool's shape chose the strategy, where it did (app/pool_shape.py)."""
    control: int | None = None
    """Of the queued, the uniform control share."""
    control_wrong_share: float | None = Field(None, alias="control_yield")
    taken_meanwhile: int | None = None
    """Picks another worker or a labeler took before they could be queued."""


class RunMetrics(Record):
    graded: int | None = None
    """Final answers graded at the start of the run."""
    phase1_examples: int | None = None
    """PRM800K phase 1 examples added to the training part (``train_phase1_labels``)."""
    examples: int | None = None
    """Examples of every label, held-out ones too (``train.examples``: those trained on)."""
    labels: int | None = None
    labels_trained: int | None = None
    """Labels on training problems; the others are held out (or left out)."""
    labels_held_out: int | None = None
    split: Split | None = None
    left_out: Annotated[list[LeftOut], _items_that_fit(LeftOut)] | None = Field(
        None, alias="evaluation_left_out"
    )
    """What the evaluation sets left out, and why; None for a run that did not say."""
    skipped: str | None = None
    """Why the run stopped before training (too few labels)."""
    stopped_after_gate: str | None = None
    """A stop asked for once the gate had judged the model (``stopped before score``): the
    run succeeded, its model current if promoted, without what came after."""
    missing: Annotated[dict[str, str], _items_that_fit(str)] = Field(
        default_factory=dict, alias="evaluation_missing"
    )
    """Per evaluation set the run had no files for, why (naming the setting)."""
    training_args: dict[str, Any] = Field(default_factory=dict)
    """Every training argument, as the run recorded it."""
    train: dict[str, Any] = Field(default_factory=dict)
    """Training statistics (worker/train.py ``FitStats``)."""
    evaluation: Evaluation | None = None
    current_on_this_evaluation: Evaluation | None = None
    """The PRM that was current, judged on the same sets; None for the first model."""
    gate: Gate | None = None
    checkpoint_bytes: int | None = None
    """The checkpoint's size when it was saved (kept after it is pruned)."""
    pruned_checkpoints: Annotated[list[int], _items_that_fit(int)] = Field(default_factory=list)
    """Runs whose checkpoints this run deleted."""
    pool: Annotated[dict[str, int], _items_that_fit(int)] = Field(default_factory=dict)
    """The unlabeled pool when the run looked at it: pool, wrong-answer candidates, ungraded."""
    pace: Pace | None = None
    pool_scored: int | None = None
    pool_scored_with: int | None = None
    """The run whose PRM scored the pool (this one, or the current one it kept)."""
    selection: Selection | None = None
    generation: int | None = None
    """The generation the run queued."""

    @classmethod
    def read(cls, data: Any) -> Self:
        """A run's stored metrics; an empty record for none (or anything but an object)."""
        return cls.model_validate(data if isinstance(data, dict) else {})

    @property
    def best_of_n(self) -> BestOfN | None:
        """The headline best-of-N: the first set with figures, else the first set."""
        sets = list(self.evaluation.best_of_n_sets.values()) if self.evaluation else []
        return next((s for s in sets if s.why_none is None), sets[0] if sets else None)

    @property
    def shown_training_args(self) -> dict[str, Plain]:
        """The training arguments with a plain value, as the run page lists them."""
        return _plain_values(self.training_args)

    @property
    def train_figures(self) -> dict[str, Plain]:
        """The training statistics with a plain value (the epoch losses apart)."""
        return _plain_values(self.train)

    @property
    def epoch_losses(self) -> list[float]:
        losses = self.train.get("epoch_losses")
        items = losses if isinstance(losses, list) else []
        return [float(n) for n in items if isinstance(n, int | float) and not isinstance(n, bool)]

    @property
    def mode(self) -> str | None:
        """The training mode: full, head or lora."""
        mode = self.training_args.get("mode")
        return mode if isinstance(mode, str) else None


def _plain_values(values: dict[str, Any]) -> dict[str, Plain]:
    return {k: v for k, v in values.items() if isinstance(v, str | int | float | None)}
