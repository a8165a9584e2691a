"""The command line's habits, as a Python user expects them: exit codes (0 ok, 1 failure,
2 usage, 130 Ctrl-C), `-v` before or after the command, a closed pipe ends it quietly, the
name `paperbell` in its usage lines and its shell completion, plurals that agree."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import PAPERBELL, clean_env, invoke, outcome, run, start

import bot
from bot.core.plurals import plural
from bot.store import schema_state


@pytest.mark.parametrize(
    "args", [["-v", "db", "current"], ["db", "current", "-v"], ["db", "-v", "current"]]
)
def test_verbose_works_after_the_command_too(tmp_path: Path, args: list[str]) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'version = 1\n[database]\nurl = "sqlite:///{tmp_path / "db.sqlite"}"\n')
    quiet = run("db", "upgrade", "-c", str(config), cwd=tmp_path)
    assert quiet.returncode == 0 and "INFO" not in quiet.stderr
    done = run(*args, "-c", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "INFO alembic" in done.stderr, args


def test_twice_verbose_is_debug(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'version = 1\n[database]\nurl = "sqlite:///{tmp_path / "db.sqlite"}"\n')
    debug = run("poll", "-c", str(config), "-vv", cwd=tmp_path)
    assert debug.returncode == 0 and "no sources configured" in debug.stdout
    assert "DEBUG" in debug.stderr
    assert "-v, --verbose" in invoke("poll", "--help").output
    assert "-v, --verbose" in invoke("db", "upgrade", "--help").output


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    command = " ".join([*PAPERBELL[:2], repr(PAPERBELL[2])])
    done = subprocess.run(
        ["sh", "-c", f"{command} try robot --demo --limit 0 | head -1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(),
    )
    assert done.stdout == "rule: robot\n"
    assert done.stderr == ""  # no traceback, no "Exception ignored", no "error: cannot write"


def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        config = tmp_path / "config.toml"
        config.write_text(
            f'version = 1\n[database]\nurl = "sqlite:///{tmp_path / "db.sqlite"}"\n'
            f'[[sources]]\nkind = "feed"\nname = "slow"\nurl = "http://127.0.0.1:{port}/"\n'
        )
        process = start("poll", "-c", str(config), cwd=tmp_path)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the request is waiting for its answer
            silent.settimeout(0.2)
            try:
                connection, _ = silent.accept()
                break
            except TimeoutError:
                assert process.poll() is None, process.communicate()
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        connection.close()
    assert process.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err and "Aborted" not in err


def test_usage_lines_say_paperbell_however_it_was_started(tmp_path: Path) -> None:
    done = run("try", cwd=tmp_path)  # python -c ...: still `paperbell`
    assert done.returncode == 2
    assert "Usage: paperbell try [OPTIONS] [RULE]" in done.stderr
    assert "give a RULE, or --like ID" in done.stderr
    code, out = outcome("nosuchcommand")
    assert code == 2 and "No such command 'nosuchcommand'" in out


@pytest.mark.database
def test_commands_that_only_read_make_no_database(tmp_path: Path, database_url: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'version = 1\n[database]\nurl = "{database_url}"\n[llm]\n'
        'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    for args in (
        ["status"],
        ["list"],
        ["try", "robot"],
        ["digest", "--dry-run"],
        ["digest", "--out", str(tmp_path / "out")],
        ["summarize", "2411.17700"],
        ["db", "current", "-c", str(config)],
        ["check-config", "-c", str(config)],
    ):
        code, out = outcome(*args) if "-c" in args else outcome(*args, config=config)
        assert not schema_state(database_url).exists, args
        if args[0] in ("db", "check-config"):
            assert code == 0 and "no database yet" in out, out
            continue
        assert code == 1, (args, out)
        assert out.startswith("error: there is no database yet (")
        assert f"hint: start with `paperbell poll -c {config}`" in out
        assert ("--demo" in out) == (args[0] == "try")
    assert not (tmp_path / "out").exists()
    code, out = outcome("poll", config=config)
    assert code == 0 and schema_state(database_url).up_to_date
    code, out = outcome("list", config=config)
    assert code == 0 and out == "no subscribers\n"


def test_counts_agree_with_their_nouns(tmp_path: Path) -> None:
    assert plural(1, "paper") == "1 paper" and plural(0, "paper") == "0 papers"
    assert plural(1504, "paper") == "1,504 papers"
    assert (
        plural(1, "entry", "entries") == "1 entry" and plural(2, "entry", "entries") == "2 entries"
    )
    config = tmp_path / "config.toml"
    config.write_text(
        f'version = 1\n[database]\nurl = "sqlite:///{tmp_path / "db.sqlite"}"\n'
        '[[sources]]\nkind = "arxiv"\ncategories = ["cs"]\n[email]\nfrom = "a@b.org"\n'
        '[[subscribers]]\nname = "ada"\nemail = "ada@b.org"\nrules = ["robot"]\n'
    )
    code, out = outcome("check-config", config=config)
    assert code == 0 and "OK (1 source, 1 subscriber, 1 rule; database" in out
    code, out = outcome("subscribe", "bob", "--email", "bob@b.org", "robot", config=config)
    assert code == 0 and "\n1 rule:\n  1. robot" in out
    code, out = outcome("list", config=config)
    assert code == 0 and "ada <ada@b.org> [config, active] 0 papers sent" in out


def test_no_count_is_made_plural_by_hand() -> None:
    """One helper (bot.core.plurals) for every count: no `'s' if n != 1`, no "rule(s)"."""
    by_hand = re.compile(r"""\{['"]s['"] if |[a-z]\(s\)[:'"]""")
    for path in sorted(Path(bot.__file__).parent.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if by_hand.search(line.replace("http(s)", "").replace("Author(s)", "")):
                raise AssertionError(f"{path.name}:{number}: {line.strip()}")


def test_bash_completes_the_installed_command(tmp_path: Path) -> None:
    """The manual's line (docs/cli.md), in a real bash, with the `paperbell` that pip installed."""
    installed = Path(sys.executable).parent / "paperbell"
    bash = shutil.which("bash")
    if not installed.exists() or bash is None:
        pytest.skip("needs bash and the installed paperbell command (pip install .)")
    script = (
        'eval "$(_PAPERBELL_COMPLETE=bash_source paperbell)"\n'
        "complete -p paperbell\n"
        'for line in "paperbell tr" "paperbell try -survey --de" '
        '"paperbell subscribe ada --include r"; do\n'
        '  read -ra COMP_WORDS <<< "$line"; COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
        "  COMPREPLY=(); _paperbell_completion paperbell\n"
        '  echo "${COMPREPLY[*]}"\n'
        "done\n"
    )
    env = {**clean_env(), "PATH": f"{installed.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "complete -o nosort -F _paperbell_completion paperbell"
    assert lines[1:] == ["try", "--demo", "replace"]


def test_bad_usage_exits_2_with_the_usage_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'version = 1\n[llm]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
        '[[sources]]\nkind = "arxiv"\ncategories = ["cs"]\n'
    )
    for args, said in [
        (("backfill", "--since", "2024-11-28", "--until", "2024-11-01"), "is before --since"),
        (("summarize", *(f"2411.{n:05d}" for n in range(21))), "at most 20 papers at once"),
        (("summarize", "2411.17700", "--language", "klingon!"), "not a BCP 47 language tag"),
        (("try", "robot", "--limit", "-1"), "-1 is not in the range x>=0"),
        (("poll", "--source", "nope"), "no source named 'nope'"),
    ]:
        code, out = outcome(*args, config=config)
        assert code == 2 and said in out, (args, out)
