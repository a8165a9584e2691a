"""Running the `paperbell` command: in this process with Click's test runner (`invoke`,
`outcome`, and `run_here`, which answers as `run` does), or as a user does, a separate process
with no PAPERBELL_ variables from the test environment (`run`, `start`); and what a fresh
Python imports to run some code (`modules_after`, `loaded`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from bot.cli import main

PAPERBELL = [sys.executable, "-c", "from bot.cli import main; main()"]
# The same, with Python's own Ctrl-C handler put back first (an inherited "ignore SIGINT"
# would otherwise stay: Python keeps it, and so would the command).
INTERRUPTIBLE = [
    sys.executable,
    "-c",
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from bot.cli import main; main()",
]


def invoke(
    *args: str,
    config: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
) -> Result:
    """Run `paperbell ARGS` in this process; with `config`, `-c CONFIG` follows the
    command's name (so it stays before a `--`); `stdin`: what it reads on its input."""
    if config is not None:
        args = (args[0], "-c", str(config), *args[1:])
    return CliRunner().invoke(main, list(args), env=env, input=stdin)


def outcome(
    *args: str, config: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """`invoke`'s exit code and output."""
    result = invoke(*args, config=config, env=env)
    return result.exit_code, result.output


def clean_env() -> dict[str, str]:
    """The environment without PAPERBELL_ variables (a test database URL, a config path)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PAPERBELL_")}


def run(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `paperbell ARGS` to the end and capture its output; `env`: variables to set
    besides the clean environment (a secret, a database URL)."""
    return subprocess.run(
        [*PAPERBELL, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean_env(), **(env or {})},
    )


def run_here(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`run`'s answer (exit code, output, error output with an uncaught exception's
    traceback) from the command line run in this process: no process start, for a test of
    many commands. The environment is `run`'s: no PAPERBELL_ variables, `env` set."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PAPERBELL_")}
    result = CliRunner().invoke(main, list(args), env={**unset, **(env or {})})
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, stderr)


def start(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    """Start `paperbell ARGS` in the background, its output captured. Ctrl-C reaches it
    even when the tests themselves were started with SIGINT ignored (a background job of a
    shell without job control), as a user's terminal would deliver it."""
    return subprocess.Popen(
        [*INTERRUPTIBLE, *args],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def modules_after(code: str, *, cwd: Path) -> set[str]:
    """The modules a fresh Python has imported after running `code` (which may exit)."""
    script = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        f"{code}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stderr.splitlines()[-1]))


def loaded(modules: set[str], libraries: tuple[str, ...]) -> list[str]:
    """Which of `libraries` (top-level names) are among `modules`."""
    return sorted(lib for lib in libraries if any(m.partition(".")[0] == lib for m in modules))
