"""Settings, read from the environment (prefix ``STEPLABEL_``) or a ``.env`` file."""

import ipaddress
import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ENV_PREFIX = "STEPLABEL_"
SUPPORTED_DATABASES = ("sqlite", "postgresql+psycopg")
SECRET_KEY_MIN_CHARS = 32
"""The shortest session key accepted, spaces around it not counted: anyone who guesses the
key can sign a cookie that logs them in as anyone."""


class SettingsError(RuntimeError):
    """A setting is missing or malformed; the message names the environment variable."""


# The training arguments' bounds, once: Settings' ``train_*`` fields and worker/training_args.py's
# TrainingArgs are declared with these types, so a value Settings accepts is one the
# worker can train with.
# Finite: an infinite rate or decay trains a model of NaNs.
LearningRate = Annotated[float, Field(gt=0, allow_inf_nan=False)]
# At most 1,000: training plans every epoch's batches before its first step, so a mistyped
# count (10**20) would fill memory before a stop could be heard.
Epochs = Annotated[int, Field(ge=1, le=1000)]
BatchSize = Annotated[int, Field(ge=1)]
MaxLength = Annotated[int, Field(ge=2)]
WarmupRatio = Annotated[float, Field(ge=0, lt=1)]
WeightDecay = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PackRows = Annotated[int, Field(ge=0)]
BackboneDepth = Annotated[float, Field(gt=0, le=1)]
HeadMembers = Annotated[int, Field(ge=1)]
HeadHidden = Annotated[int, Field(ge=0)]
# What every seeded generator takes (the bootstrap's refuses a negative one).
Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]

Strategy = Literal[
    "convincing_wrong",
    "uniform",
    "random_wrong",
    "uncertain",
    "disagreement",
    "ensemble",
    "convincing_uncertain",
    "diverse",
]
"""The selection strategies (worker/select.py says each)."""
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)


class Settings(BaseSettings):
    # No infinity or NaN in any number: the worker's timers and training cannot use them.
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", allow_inf_nan=False
    )

    database_url: str = "sqlite:///./steplabel.db"
    """SQLite (the embedded default) or ``postgresql+psycopg://user@host:port/db``."""

    sql_echo: bool = False
    """Log every SQL statement (debugging)."""

    secret_key: str | None = None
    """Signs session cookies (SECRET_KEY_MIN_CHARS or more). Unset: a random key kept in
    ``secret_key_file``."""

    secret_key_file: Path = Path("steplabel-secret.key")

    secure_cookies: bool = False
    """Send the session cookie over HTTPS only (set it behind TLS)."""

    trusted_proxies: Annotated[list[str], NoDecode] = []
    """Addresses or networks (``10.0.0.0/8``) of reverse proxies whose ``X-Forwarded-For``
    and ``X-Forwarded-Proto`` say who the client is; comma-separated. None by default: a
    client could otherwise name any address and dodge the per-address login limits."""

    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """The largest request body, except dataset uploads; a larger one is answered 413."""

    max_upload_bytes: int = Field(default=2 * 1024**3, ge=1024)
    """The largest dataset upload: to ``/admin/imports`` from a logged-in admin, or a batch
    pushed to ``/api/v1/imports`` with an API token."""

    lease_minutes: int = Field(default=30, ge=1, le=24 * 60)
    """How long a task stays with a labeler before it returns to the queue."""

    overlap: int = Field(default=1, ge=1, le=100)
    """Distinct labelers per solution, unless a solution sets its own."""

    qc_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    """Share of tasks that are quality-control questions, while any are left."""

    screening_threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    """Share of a gold label's step ratings a labeler must match to pass screening and QC."""

    qc_min_answers: int = Field(default=3, ge=1, le=1000)
    """Quality-control answers a labeler needs before QC gives a verdict, counting those that
    rate a step the gold label rates: one answer is too few to call anyone failing."""

    # The PRM worker (python -m worker).
    prm_base_model: str = "smollm2-135m"
    """A prepared model's name (``python -m worker prepare --list``), a local Hugging Face
    checkpoint directory, or ``tiny`` (a small decoder built in code, for tests)."""

    model_dir: Path = Path("models")
    """Where prepared base models are kept."""

    checkpoint_dir: Path = Path("checkpoints")

    checkpoint_keep_last: int = Field(default=3, ge=1)
    """Checkpoints kept besides the current and the pinned ones; older ones are deleted."""

    worker_poll_seconds: float = Field(default=30.0, gt=0, le=86_400)
    """At most a day: a longer wait overflows the timer it sleeps on."""

    train_every_minutes: float = Field(default=60.0, ge=0, le=527_040)
    """Start a run this long after the last successful one began; 0 turns the timer off.
    At most 366 days (a longer span overflows the date it is added to)."""

    train_min_new_labels: int = Field(default=50, ge=0)
    """Start a run once this many labels arrived since the last; 0 turns this off."""

    train_min_labels: int = Field(default=40, ge=1)
    """A run trains only on at least this many labels on its training problems (judged
    labels; those on held-out problems do not count): about 50 labels in all."""

    train_include_quality_control: bool = False
    train_include_screening: bool = False
    train_labels: Literal["all", "consensus"] = "all"
    """``all``: every label is an example; ``consensus``: one label per solution, as
    ``steplabel export --consensus`` writes it (app/consensus/; QC and screening answers,
    which never vote, are left out whatever the two settings above say)."""

    # Training arguments (worker/training_args.py TrainingArgs); unset: the default for the base
    # model and the mode. Every run stores the arguments it used.
    train_mode: Literal["auto", "full", "head", "lora"] = "auto"
    """``auto``: full fine-tuning on a GPU, a frozen backbone and a trained head on the CPU."""
    train_learning_rate: LearningRate | None = None
    train_epochs: Epochs | None = None
    train_batch_size: BatchSize | None = None
    train_max_length: MaxLength | None = None
    train_warmup_ratio: WarmupRatio | None = None
    train_weight_decay: WeightDecay | None = None
    train_gradient_checkpointing: bool | None = None
    train_precision: Literal["auto", "fp32", "bf16", "bf16-master"] = "auto"
    """``auto``: bf16 on a GPU that supports it and on a CPU with AMX, else fp32. ``bf16``
    autocasts over float32 weights; ``bf16-master`` trains bf16 weights through float32
    master copies (``full`` and ``lora`` modes; worker/precision.py)."""
    train_pack: bool = False
    """``full`` and ``lora`` modes: several solutions per training row, no padding."""
    train_pack_rows: PackRows = 0
    """With ``train_pack``: 0 packs each batch of ``train_batch_size`` solutions; N fills N
    rows a batch, whatever the number of solutions that takes."""
    train_compile: bool = False
    """Each decoder layer through ``torch.compile`` while training (``full`` and ``lora``
    modes) and scoring."""
    train_backbone_depth: BackboneDepth | None = None
    train_head_readings: str | None = None
    """``head`` mode: the readings the head reads, comma-separated (worker/model.py
    ``HEAD_READINGS``: end@1, end@0.75, end@0.5, mean@1, mean@0.75)."""
    train_head_members: HeadMembers | None = None
    """``head`` mode: the members of the head's ensemble; the uncertainty strategies that
    read their disagreement need two or more."""
    train_head_hidden: HeadHidden | None = None
    """``head`` mode: 0 for linear members, else each member's hidden width."""
    train_phase1_labels: Path | None = None
    """A PRM800K phase-1 stepwise file (shared/data/prm800k_phase1_stepwise.jsonl.gz): the
    human ratings of its training split (42,906 rated steps of 900 problems, worker/phase1.py)
    are trained on in every run beside the team's own labels, except on held-out problems;
    its test split is never read. Unset: the team's labels alone. In ``head`` mode their
    features are computed once (hours on 2 CPU cores, see README's model section)."""
    train_phase1_problems: int | None = Field(default=None, ge=1)
    """With ``train_phase1_labels``: the ratings of this many of its training problems only,
    the same ones every time (worker/phase1.py ``training_sample``); unset: all 900. The
    configuration recommended for a CPU team takes 30 (BENCHMARKS.md, "Issue 38")."""
    train_held_out_fraction: float = Field(default=0.2, ge=0, lt=1)
    """Share of labeled problems never trained on, for the step AUROC and the gate."""
    train_seed: Seed = 0

    gate_metric: Literal["step_auroc", "processbench_f1", "best_of_n"] = "step_auroc"
    """The primary metric: a new PRM replaces the current one only when it is better or
    equal on it (the first of the others that both can be judged on, where this one
    cannot), and not worse beyond ``gate_margin`` on any."""

    # Figures a user can trust: the gate's margin, the held-out split, the control share.
    gate_margin: float = Field(default=0.02, ge=0, lt=1)
    """How much worse than the current PRM a new one may be on a metric, at the lower end
    of the difference's 95% interval, and still be promoted."""

    train_split_seed: Seed = 0
    """Which problems are held out (with ``train_held_out_fraction``); apart from
    ``train_seed``, so a new initialization leaves the held-out problems where they are."""

    select_control_share: float = Field(default=0.1, ge=0, lt=1)
    """Share of each generation picked uniformly at random from the pool: labels no PRM
    chose, for the held-out figures and to see whether the selection pays."""

    eval_dir: Path | None = None
    """A directory with the evaluation files (processbench_*.jsonl, the best-of-N
    samples); unset: those figures are not computed."""

    eval_processbench_per_subset: int = Field(default=60, ge=0)
    """ProcessBench solutions per subset in each of the calibration and test samples;
    0: all of them (3,400 solutions, over an hour of feature work on 2 CPU cores in ``head``
    mode, once per base model: the OlympiadBench and Omni-MATH solutions are long)."""

    eval_best_of_n_problems: int = Field(default=40, ge=0)
    """Problems of the best-of-N sample set evaluated (8 samples each); 0: all 100."""

    select_strategy: Literal[Strategy, "by_pool_shape"] = "by_pool_shape"
    """How a generation is chosen (worker/select.py says each; README, "Choosing what to
    label", has their figures): the paper's convincing wrong answers, a uniform pick, the
    paper's shape at random, or by the PRM's uncertainty (its first-error entropy, its head
    members' disagreement, ActPRM's step uncertainty, the entropy weighed by the chance the
    PRM is fooled, or ActPRM's spread over the feature space). The default,
    ``by_pool_shape``, takes the strategy BENCHMARKS.md measured best for the pool's median
    unlabeled solutions per problem (app/pool_shape.py, issue 39)."""

    select_per_problem: int = Field(default=4, ge=1)
    """Solutions queued per problem by each active-learning selection."""

    select_wrong_share: float = Field(default=0.8, ge=0.0, le=1.0)
    """Share of a selection that is convincing wrong-answer solutions."""

    select_global_top_k: int | None = Field(default=None, ge=1)
    """Select the top K over the whole pool instead of K per problem."""

    generation_min_done: float = Field(default=0.8, ge=0.0, le=1.0)
    """A new generation is queued only once the open one is this share labeled."""

    generation_max_size: int = Field(default=400, ge=1)
    """At most this many solutions per generation."""

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxy_networks(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        for entry in entries:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network") from None
        return entries

    @field_validator("secret_key")
    @classmethod
    def _long_enough_key(cls, key: str | None) -> str | None:
        if key is not None and len(key.strip()) < SECRET_KEY_MIN_CHARS:
            raise ValueError(
                f"a session key needs at least {SECRET_KEY_MIN_CHARS} characters besides "
                "spaces: make one with python -c 'import secrets; "
                "print(secrets.token_urlsafe(48))', or unset it to have one made and kept"
            )
        return key

    @field_validator("eval_dir")
    @classmethod
    def _existing_eval_dir(cls, directory: Path | None) -> Path | None:
        # A mistyped directory would otherwise leave every evaluation figure out, unsaid.
        if directory is not None and not directory.is_dir():
            raise ValueError(f"no directory at {str(directory)!r}; unset it to skip those figures")
        return directory

    @field_validator("checkpoint_dir")
    @classmethod
    def _checkpoint_folder(cls, directory: Path) -> Path:
        # Made on first use; a file in its place would fail the first run after training.
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"{str(directory)!r} is a file, not a folder")
        # Absolute: the runs store their checkpoints' paths, which a worker started in
        # another folder must find (and prune) all the same.
        return directory.resolve()

    @field_validator("train_phase1_labels")
    @classmethod
    def _existing_phase1_file(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_file():
            raise ValueError(f"no file at {str(path)!r}; unset it to train on the team's labels")
        return path

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, url: str) -> str:
        scheme = url.split("://", 1)[0]
        if "://" not in url or scheme not in SUPPORTED_DATABASES:
            raise ValueError(
                f"unsupported database URL {url!r}: use sqlite:///PATH "
                "or postgresql+psycopg://USER@HOST:PORT/DATABASE"
            )
        return url


def describe_validation_error(error: ValidationError) -> str:
    """Turn pydantic's error into lines that name the environment variables."""
    lines = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"])
        lines.append(f"{ENV_PREFIX}{field.upper()}: {problem['msg']}")
    return "; ".join(lines)


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings; a bad value raises SettingsError naming the variable."""
    try:
        return Settings()
    except ValidationError as error:
        raise SettingsError(f"invalid settings: {describe_validation_error(error)}") from None


def session_secret(settings: Settings) -> str:
    """The cookie-signing key: the setting, else one made once and kept in a file.

    SettingsError when the file holds a key too short to trust (empty, say): the server
    does not start on it."""
    if settings.secret_key:
        return settings.secret_key
    path = settings.secret_key_file
    if not path.exists():
        _keep_new_key(path)
    key = path.read_text().strip()
    if len(key) < SECRET_KEY_MIN_CHARS:
        raise SettingsError(
            f"{path} holds a session key of {len(key)} characters, fewer than the "
            f"{SECRET_KEY_MIN_CHARS} needed: delete it to have a new key made (everyone is "
            f"logged out), or set {ENV_PREFIX}SECRET_KEY"
        )
    return key


def _keep_new_key(path: Path) -> None:
    """Put a new random key in ``path``, whole or not at all, unless a key is there already.

    The key is written to a file of its own and flushed to disk, then linked to ``path``,
    which fails if ``path`` exists: processes starting at once all read the one key that
    got there first, and a crash or a full disk leaves no key, never part of one."""
    # mkstemp's file is its owner's alone (0600), as the key's must be.
    try:
        descriptor, draft = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as error:  # no such folder; one this user may not write (a container's)
        raise SettingsError(
            f"cannot make a session key in {path.parent}: {error.strerror}; set "
            f"{ENV_PREFIX}SECRET_KEY, or {ENV_PREFIX}SECRET_KEY_FILE to a file in a folder "
            "this process may write"
        ) from None
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(48))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:
            return
        _sync_folder(path.parent)
    finally:
        os.unlink(draft)


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries to disk, so that a file just linked there stays."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
