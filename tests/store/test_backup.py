"""`paperbell db backup PATH`: a SQLite file copied with SQLite's online backup, whole and
consistent while another connection holds a write transaction open or keeps writing; the
copy opens, lists the same subscribers and deliveries, and is at the same schema. An
existing file is kept unless --force; a PostgreSQL database gets the `pg_dump` command to
run (without its password) and nothing is written."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from support.cli import invoke, run
from support.config import local_feed_config, sink_email, toml_table
from support.servers import smtp_sink

from bot.core.errors import StoreError
from bot.store import backup_database, schema_state
from bot.store.schema import head

PAPERS = 1504  # the real listing of 28 Nov 2024 that local_feed_config reads


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a config and its SQLite file holding real data: the listing polled,
    two subscribers added from the command line, their digests sent over SMTP (deliveries
    recorded). Made once; each test works on its own copy (`populated`)."""
    folder = tmp_path_factory.mktemp("made")
    config = folder / "config.toml"
    with smtp_sink() as (sink, port):
        config.write_text(
            local_feed_config("sqlite:///paperbell.sqlite") + toml_table("email", sink_email(port))
        )
        assert invoke("poll", config=config).exit_code == 0
        for name, rule in (("ada", '"language model"'), ("bo", "robot")):
            added = invoke("subscribe", name, "--email", f"{name}@example.org", rule, config=config)
            assert added.exit_code == 0, added.output
        sent = invoke("digest", "--since", "2024-11-28", config=config)
        assert sent.exit_code == 0, sent.output
        assert len(sink.messages) == 2
    return folder


def populated(folder: Path, made: Path) -> tuple[Path, Path]:
    """A copy of `made` in `folder`: its config and database file."""
    for name in ("config.toml", "paperbell.sqlite"):
        shutil.copy(made / name, folder / name)
    return folder / "config.toml", folder / "paperbell.sqlite"


def pointing_at(config: Path, database: Path) -> Path:
    """A copy of `config` that reads `database` instead."""
    other = config.with_name(f"{database.stem}.toml")
    other.write_text(
        config.read_text().replace("sqlite:///paperbell.sqlite", f"sqlite:///{database}")
    )
    return other


def ask(database: Path, sql: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(database)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def count(database: Path, sql: str) -> int:
    return int(ask(database, sql)[0][0])  # type: ignore[call-overload]


def intact(database: Path) -> bool:
    return ask(database, "PRAGMA integrity_check") == [("ok",)]


def test_the_backup_opens_with_every_row_and_the_schema(tmp_path: Path, made: Path) -> None:
    config, database = populated(tmp_path, made)
    copy = tmp_path / "backups" / "monday.sqlite"
    copy.parent.mkdir()
    done = run("db", "backup", "-c", str(config), str(copy), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    size = copy.stat().st_size
    assert done.stdout == (
        f"backed up {database} to {copy}: {size / 1_000_000:.1f} MB ({size:,} bytes), "
        f"schema {head()} (newest)\n"
    )
    assert schema_state(f"sqlite:///{copy}").current == head()
    assert count(copy, "SELECT count(*) FROM papers") == PAPERS
    listed = invoke("list", config=config)
    assert "papers sent" in listed.output
    assert invoke("list", config=pointing_at(config, copy)).output == listed.output
    assert intact(copy)
    assert not list(tmp_path.glob("backups/.*"))  # no partial file left beside it


def test_a_write_transaction_held_open_does_not_stop_it_nor_get_in(
    tmp_path: Path, made: Path
) -> None:
    config, database = populated(tmp_path, made)
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the write lock, as the daemon holds it mid-write
    writer.execute("DELETE FROM papers WHERE id IN (SELECT id FROM papers LIMIT 100)")
    copy = tmp_path / "held.sqlite"
    done = run("db", "backup", "-c", str(config), str(copy), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert count(copy, "SELECT count(*) FROM papers") == PAPERS  # what was committed
    writer.execute("COMMIT")  # the writer was not broken by the backup
    writer.close()
    assert count(database, "SELECT count(*) FROM papers") == PAPERS - 100
    assert intact(copy)


def test_a_copy_taken_while_another_process_writes_is_consistent(
    tmp_path: Path, made: Path
) -> None:
    config, database = populated(tmp_path, made)
    # Each transaction moves one from a paper's version to another's: any consistent
    # state has the same sum, a torn one (half a transaction) does not.
    total = count(database, "SELECT sum(version) FROM papers")
    ids = [row[0] for row in ask(database, "SELECT id FROM papers LIMIT 50")]
    stop = threading.Event()
    moved = [0]

    def write() -> None:
        connection = sqlite3.connect(database, timeout=30)
        try:
            while not stop.is_set():
                a, b = ids[moved[0] % 50], ids[(moved[0] + 1) % 50]
                with connection:
                    connection.execute("UPDATE papers SET version = version + 1 WHERE id = ?", (a,))
                    connection.execute("UPDATE papers SET version = version - 1 WHERE id = ?", (b,))
                moved[0] += 1
        finally:
            connection.close()

    writing = threading.Thread(target=write)
    writing.start()
    try:
        while moved[0] < 20:  # writing before the backup starts
            stop.wait(0.01)
        before = moved[0]
        copies = [tmp_path / f"busy-{n}.sqlite" for n in range(3)]
        for copy in copies:
            done = run("db", "backup", "-c", str(config), str(copy), cwd=tmp_path)
            assert done.returncode == 0, done.stderr
        assert moved[0] > before  # and during it
    finally:
        stop.set()
        writing.join()
    for copy in copies:
        assert intact(copy)
        assert count(copy, "SELECT sum(version) FROM papers") == total
        assert count(copy, "SELECT count(*) FROM papers") == PAPERS
        assert schema_state(f"sqlite:///{copy}").current == head()


def test_a_file_locked_for_writing_too_long_is_an_error_not_a_hang(
    tmp_path: Path, made: Path
) -> None:
    _, database = populated(tmp_path, made)
    writer = sqlite3.connect(database, isolation_level=None)
    # In write-ahead-log mode a writer's transaction leaves readers be (a backup copies
    # the last commit); one in exclusive locking mode shuts them out.
    writer.execute("PRAGMA locking_mode=EXCLUSIVE")
    writer.execute("BEGIN EXCLUSIVE")
    target = tmp_path / "locked.sqlite"
    started = time.monotonic()
    with pytest.raises(StoreError, match="database is locked") as raised:
        backup_database(f"sqlite:///{database}", target, timeout=0.5)
    assert time.monotonic() - started < 10
    assert str(raised.value) == (
        f"cannot back up {database} to {target}: database is locked (a write held it for "
        "over 0.5 s)\n  hint: run it again in a moment"
    )
    writer.execute("ROLLBACK")
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir() if "locked" in p.name) == []


def test_a_writer_does_not_hold_the_backup_of_a_write_ahead_log_file(
    tmp_path: Path, made: Path
) -> None:
    _, database = populated(tmp_path, made)
    writer = sqlite3.connect(database, isolation_level=None)
    assert writer.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("DELETE FROM papers")  # not committed: the copy does not see it
    target = tmp_path / "during.sqlite"
    backup_database(f"sqlite:///{database}", target, timeout=0.5)
    writer.execute("ROLLBACK")
    writer.close()
    assert count(target, "SELECT count(*) FROM papers") == PAPERS


def test_an_existing_file_is_kept_unless_force(tmp_path: Path, made: Path) -> None:
    config, _ = populated(tmp_path, made)
    target = tmp_path / "kept.sqlite"
    target.write_bytes(b"last week's backup")
    refused = invoke("db", "backup", "-c", str(config), str(target))
    assert refused.exit_code == 2
    assert refused.output == f"error: {target} exists; use --force to overwrite it\n"
    assert target.read_bytes() == b"last week's backup"
    forced = invoke("db", "backup", "-c", str(config), "--force", str(target))
    assert forced.exit_code == 0, forced.output
    assert count(target, "SELECT count(*) FROM papers") == PAPERS


def test_no_database_yet_is_said_and_nothing_is_created(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(local_feed_config("sqlite:///paperbell.sqlite"))
    missing = invoke("db", "backup", "-c", str(config), str(tmp_path / "copy.sqlite"))
    assert missing.exit_code == 1
    assert missing.output == (
        f"error: no database to back up: {tmp_path / 'paperbell.sqlite'} does not exist\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_postgresql_is_told_the_pg_dump_command_without_its_password(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    url = "postgresql://paperbell:s3cret-pw@db.example.org:5433/papers?sslmode=require"
    config.write_text(local_feed_config(url))
    target = tmp_path / "papers.dump"
    told = invoke("db", "backup", "-c", str(config), str(target))
    assert told.exit_code == 1
    assert "s3cret-pw" not in told.output
    assert told.output == (
        "error: paperbell backs up SQLite files only, not "
        "postgresql://paperbell:***@db.example.org:5433/papers?sslmode=require\n"
        "  hint: back PostgreSQL up with pg_dump (the password from PGPASSWORD or "
        f"~/.pgpass): pg_dump --format=custom --file={target} "
        "'postgresql://paperbell@db.example.org:5433/papers?sslmode=require'\n"
    )
    assert not target.exists()
