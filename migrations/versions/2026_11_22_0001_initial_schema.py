"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 05:15:06.968478
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "login_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_failures")),
    )
    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_login_failures_address"), ["address"], unique=False)
        batch_op.create_index("ix_login_failures_name_at", ["name", "at"], unique=False)

    op.create_table(
        "problems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("content_key", sa.String(length=64), nullable=False),
        sa.Column("text_key", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("ground_truth_solution", sa.Text(), nullable=True),
        sa.Column("ground_truth_answer", sa.Text(), nullable=True),
        sa.Column("subject", sa.String(length=64), nullable=True),
        sa.Column("level", sa.SmallInteger(), nullable=True),
        sa.Column("source_id", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_problems")),
        sa.UniqueConstraint("content_key", name=op.f("uq_problems_content_key")),
        sa.UniqueConstraint("source_id", name=op.f("uq_problems_source_id")),
    )
    with op.batch_alter_table("problems", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_problems_subject"), ["subject"], unique=False)
        batch_op.create_index(batch_op.f("ix_problems_text_key"), ["text_key"], unique=False)

    op.create_table(
        "project_settings",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_project_settings")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=True),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("is_approved", sa.Boolean(), nullable=False),
        sa.Column("session_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("role IN ('labeler', 'admin')", name=op.f("ck_users_role")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("name", name=op.f("uq_users_name")),
        sa.UniqueConstraint("uuid", name=op.f("uq_users_uuid")),
    )
    op.create_table(
        "training_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("requested_at", sa.DateTime(), nullable=False),
        sa.Column("requested_by_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=True),
        sa.Column("step", sa.String(length=32), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("labels_used", sa.Integer(), nullable=True),
        sa.Column("metrics", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("timings", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("checkpoint_path", sa.Text(), nullable=True),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.CheckConstraint(
            "status IN ('requested', 'running', 'succeeded', 'failed')",
            name=op.f("ck_training_runs_status"),
        ),
        sa.ForeignKeyConstraint(
            ["requested_by_id"], ["users.id"], name=op.f("fk_training_runs_requested_by_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_runs")),
    )
    with op.batch_alter_table("training_runs", schema=None) as batch_op:
        batch_op.create_index("ix_training_runs_status_id", ["status", "id"], unique=False)

    op.create_table(
        "generations",
        sa.Column("number", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("selected", sa.Integer(), nullable=False),
        sa.Column("wrong_answers", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["training_runs.id"], name=op.f("fk_generations_run_id_training_runs")
        ),
        sa.PrimaryKeyConstraint("number", name=op.f("pk_generations")),
    )
    op.create_table(
        "solutions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("content_key", sa.String(length=64), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("steps", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("verifier_score", sa.Double(), nullable=True),
        sa.Column("generator", sa.String(length=255), nullable=True),
        sa.Column("source_id", sa.String(length=255), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=True),
        sa.Column("alternatives", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("style", sa.String(length=8), nullable=False),
        sa.Column("answer_correct", sa.Boolean(), nullable=True),
        sa.Column("prm_score", sa.Double(), nullable=True),
        sa.Column("prm_min_step", sa.Double(), nullable=True),
        sa.Column("prm_step_scores", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("scored_by_run_id", sa.Integer(), nullable=True),
        sa.Column("queue_state", sa.String(length=16), nullable=False),
        sa.Column("overlap", sa.Integer(), nullable=True),
        sa.Column("completed_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(
            "queue_state IN ('not_queued', 'open', 'full')", name=op.f("ck_solutions_queue_state")
        ),
        sa.CheckConstraint("style IN ('phase1', 'phase2')", name=op.f("ck_solutions_style")),
        sa.ForeignKeyConstraint(
            ["problem_id"], ["problems.id"], name=op.f("fk_solutions_problem_id_problems")
        ),
        sa.ForeignKeyConstraint(
            ["scored_by_run_id"],
            ["training_runs.id"],
            name=op.f("fk_solutions_scored_by_run_id_training_runs"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solutions")),
        sa.UniqueConstraint("content_key", name=op.f("uq_solutions_content_key")),
    )
    with op.batch_alter_table("solutions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_solutions_problem_id"), ["problem_id"], unique=False)
        batch_op.create_index(
            "ix_solutions_queue", ["queue_state", "generation", "id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_solutions_source_id"), ["source_id"], unique=False)

    op.create_table(
        "labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dedupe_key", sa.String(length=64), nullable=False),
        sa.Column("labeler_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("solution_id", sa.Integer(), nullable=True),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=True),
        sa.Column("is_quality_control", sa.Boolean(), nullable=False),
        sa.Column("is_initial_screening", sa.Boolean(), nullable=False),
        sa.Column("total_time", sa.BigInteger(), nullable=True),
        sa.Column("finish_reason", sa.String(length=16), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(
            "finish_reason IN ('found_error', 'solution', 'give_up', 'bad_problem')",
            name=op.f("ck_labels_finish_reason"),
        ),
        sa.ForeignKeyConstraint(
            ["labeler_id"], ["users.id"], name=op.f("fk_labels_labeler_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["problem_id"], ["problems.id"], name=op.f("fk_labels_problem_id_problems")
        ),
        sa.ForeignKeyConstraint(
            ["solution_id"], ["solutions.id"], name=op.f("fk_labels_solution_id_solutions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_labels")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_labels_dedupe_key")),
    )
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.create_index("ix_labels_generation_id", ["generation", "id"], unique=False)
        batch_op.create_index(
            "ix_labels_labeler_id_timestamp", ["labeler_id", "timestamp"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_labels_problem_id"), ["problem_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_labels_solution_id"), ["solution_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_labels_timestamp"), ["timestamp"], unique=False)

    op.create_table(
        "assignments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("solution_id", sa.Integer(), nullable=False),
        sa.Column("labeler_id", sa.Integer(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=True),
        sa.Column("leased_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.Column("label_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["label_id"], ["labels.id"], name=op.f("fk_assignments_label_id_labels")
        ),
        sa.ForeignKeyConstraint(
            ["labeler_id"], ["users.id"], name=op.f("fk_assignments_labeler_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["solution_id"], ["solutions.id"], name=op.f("fk_assignments_solution_id_solutions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_assignments")),
        sa.UniqueConstraint("label_id", name=op.f("uq_assignments_label_id")),
        sa.UniqueConstraint(
            "solution_id", "labeler_id", name=op.f("uq_assignments_solution_id_labeler_id")
        ),
        sa.UniqueConstraint("solution_id", "slot", name=op.f("uq_assignments_solution_id_slot")),
    )
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.create_index(
            "ix_assignments_labeler_id_completed_at", ["labeler_id", "completed_at"], unique=False
        )

    op.create_table(
        "gold_labels",
        sa.Column("solution_id", sa.Integer(), nullable=False),
        sa.Column("label_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["label_id"], ["labels.id"], name=op.f("fk_gold_labels_label_id_labels")
        ),
        sa.ForeignKeyConstraint(
            ["solution_id"], ["solutions.id"], name=op.f("fk_gold_labels_solution_id_solutions")
        ),
        sa.PrimaryKeyConstraint("solution_id", name=op.f("pk_gold_labels")),
        sa.UniqueConstraint("label_id", name=op.f("uq_gold_labels_label_id")),
    )
    op.create_table(
        "label_steps",
        sa.Column("label_id", sa.Integer(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("chosen_completion", sa.Integer(), nullable=True),
        sa.Column("human_completion", sa.JSON(none_as_null=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["label_id"],
            ["labels.id"],
            name=op.f("fk_label_steps_label_id_labels"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("label_id", "step_index", name=op.f("pk_label_steps")),
    )
    op.create_table(
        "step_completions",
        sa.Column("label_id", sa.Integer(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("completion_index", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("rating", sa.SmallInteger(), nullable=True),
        sa.Column("flagged", sa.Boolean(), nullable=True),
        sa.CheckConstraint("rating IN (-1, 0, 1)", name=op.f("ck_step_completions_rating")),
        sa.ForeignKeyConstraint(
            ["label_id", "step_index"],
            ["label_steps.label_id", "label_steps.step_index"],
            name=op.f("fk_step_completions_label_id_label_steps"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "label_id", "step_index", "completion_index", name=op.f("pk_step_completions")
        ),
    )


def downgrade() -> None:
    op.drop_table("step_completions")
    op.drop_table("label_steps")
    op.drop_table("gold_labels")
    with op.batch_alter_table("assignments", schema=None) as batch_op:
        batch_op.drop_index("ix_assignments_labeler_id_completed_at")

    op.drop_table("assignments")
    with op.batch_alter_table("labels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_labels_timestamp"))
        batch_op.drop_index(batch_op.f("ix_labels_solution_id"))
        batch_op.drop_index(batch_op.f("ix_labels_problem_id"))
        batch_op.drop_index("ix_labels_labeler_id_timestamp")
        batch_op.drop_index("ix_labels_generation_id")

    op.drop_table("labels")
    with op.batch_alter_table("solutions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_solutions_source_id"))
        batch_op.drop_index("ix_solutions_queue")
        batch_op.drop_index(batch_op.f("ix_solutions_problem_id"))

    op.drop_table("solutions")
    op.drop_table("generations")
    with op.batch_alter_table("training_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_training_runs_status_id")

    op.drop_table("training_runs")
    op.drop_table("users")
    op.drop_table("project_settings")
    with op.batch_alter_table("problems", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_problems_text_key"))
        batch_op.drop_index(batch_op.f("ix_problems_subject"))

    op.drop_table("problems")
    with op.batch_alter_table("login_failures", schema=None) as batch_op:
        batch_op.drop_index("ix_login_failures_name_at")
        batch_op.drop_index(batch_op.f("ix_login_failures_address"))

    op.drop_table("login_failures")
