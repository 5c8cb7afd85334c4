"""The users commands: add, list, deactivate, reactivate, approve, reset-password."""

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.auth import tokens
from app.auth.users import verify_password
from app.cli import cli
from app.models import AuditEntry, Role, User
from tests.factories import make_user

runner = CliRunner()


def user(engine: Engine, name: str) -> User:
    with Session(engine) as session:
        return session.scalars(select(User).where(User.name == name)).one()


def test_add_list_approve_deactivate(engine: Engine) -> None:
    added = runner.invoke(cli, ["users", "add", "carol"])
    assert added.exit_code == 0, added.output
    password = added.stdout.rsplit("password: ", 1)[1].strip()
    carol = user(engine, "carol")
    assert carol.role == "labeler" and carol.is_active and not carol.is_approved
    assert verify_password(carol.password_hash, password)

    admin = runner.invoke(
        cli, ["users", "add", "dana", "--role", "admin", "--password", "pw-1-ok!"]
    )
    assert admin.exit_code == 0 and "pw-1-ok!" not in admin.stdout
    assert verify_password(user(engine, "dana").password_hash, "pw-1-ok!")

    assert runner.invoke(cli, ["users", "approve", "carol"]).exit_code == 0
    assert user(engine, "carol").is_approved

    listed = runner.invoke(cli, ["users", "list"]).stdout.splitlines()
    assert listed == [
        f"dana\tadmin\tactive\tapproved\t{user(engine, 'dana').uuid}",
        f"carol\tlabeler\tactive\tapproved\t{carol.uuid}",
    ]

    version = user(engine, "carol").session_version
    assert runner.invoke(cli, ["users", "deactivate", "carol"]).exit_code == 0
    after = user(engine, "carol")
    assert not after.is_active and after.session_version == version + 1

    back = runner.invoke(cli, ["users", "reactivate", "carol"])
    assert back.exit_code == 0 and "reactivated carol" in back.stdout
    again = user(engine, "carol")
    assert again.is_active and again.session_version == version + 1
    assert verify_password(again.password_hash, password)


def test_errors_are_clear(engine: Engine) -> None:
    runner.invoke(cli, ["users", "add", "carol", "--password", "x-password"])
    duplicate = runner.invoke(cli, ["users", "add", "carol"])
    assert duplicate.exit_code == 1 and "already exists" in duplicate.stderr
    # The same rules as the users page: trimmed, not empty, not another's but for case.
    for name, message in [("   ", "give the user a name"), (" Carol ", "as 'carol'")]:
        refused = runner.invoke(cli, ["users", "add", name])
        assert refused.exit_code == 1 and message in refused.stderr, name
    padded = runner.invoke(cli, ["users", "add", " dana ", "--password", "x-password"])
    assert padded.exit_code == 0 and "created labeler dana\n" in padded.stdout
    assert user(engine, "dana").name == "dana"
    missing = runner.invoke(cli, ["users", "deactivate", "nobody"])
    assert missing.exit_code == 1 and "no user named 'nobody'" in missing.stderr
    bad_role = runner.invoke(cli, ["users", "add", "eve", "--role", "boss"])
    assert bad_role.exit_code == 2
    short = runner.invoke(cli, ["users", "add", "erin", "--password", "seven77"])
    assert short.exit_code == 1 and "at least 8 characters" in short.stderr
    reset = runner.invoke(cli, ["users", "reset-password", "dana", "--password", "seven77"])
    assert reset.exit_code == 1 and "at least 8 characters" in reset.stderr
    assert verify_password(user(engine, "dana").password_hash, "x-password")
    with Session(engine) as session:
        assert session.scalar(select(User).where(User.name == "erin")) is None


def test_reset_password_ends_sessions(engine: Engine) -> None:
    runner.invoke(cli, ["users", "add", "carol", "--password", "old password"])
    before = user(engine, "carol").session_version
    reset = runner.invoke(cli, ["users", "reset-password", "carol", "--password", "new password"])
    assert reset.exit_code == 0
    after = user(engine, "carol")
    assert verify_password(after.password_hash, "new password") and not verify_password(
        after.password_hash, "old password"
    )
    assert after.session_version == before + 1


def test_end_sessions_logs_a_user_out_everywhere(engine: Engine) -> None:
    runner.invoke(cli, ["users", "add", "dave", "--password", "a password"])
    before = user(engine, "dave").session_version
    ended = runner.invoke(cli, ["users", "end-sessions", "dave"])
    assert ended.exit_code == 0 and "ended every session of dave" in ended.output
    after = user(engine, "dave")
    assert after.session_version == before + 1 and after.is_active
    missing = runner.invoke(cli, ["users", "end-sessions", "nobody"])
    assert missing.exit_code != 0 and "nobody" in missing.output


def test_deactivate_revokes_the_users_tokens(engine: Engine) -> None:
    with Session(engine) as session:
        ops = make_user(session, "ops", role=Role.ADMIN)
        token, secret = tokens.create_token(session, ops, "pipeline", tokens.parse_scopes("read"))
        token_id = token.id
        session.commit()
    assert runner.invoke(cli, ["users", "deactivate", "ops"]).exit_code == 0
    assert runner.invoke(cli, ["users", "reactivate", "ops"]).exit_code == 0
    with Session(engine) as session:
        assert tokens.token_holder(session, secret) is None
        revoked = session.scalars(select(AuditEntry).where(AuditEntry.action == "token.revoke"))
        assert [(e.actor, e.target) for e in revoked] == [
            ("command line", f"token {token_id} 'pipeline'")
        ]
