"""The "two years ahead" switch (tests/support/future/sitecustomize.py): every Python process
started with it has its wall clock moved by the same amount, whenever it first reads it, and
keeps its monotonic clock.

Processes that disagree about the time take each other's outbox leases early: a `paperbell
digest` that read the clock a second after it started once lagged the test's own worker by
more than a lease, and digests went out twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import clean_env
from support.paths import FUTURE, ROOT

AHEAD_DAYS = 730

# Busy for `wait` seconds (imports, a config read) before it first asks the time, as a
# `paperbell` process is; then how far its clocks are from the real ones.
CHILD = """
import json, sys, time
from datetime import UTC, datetime

import time_machine

time.sleep(float(sys.argv[1]))
hatch = time_machine.escape_hatch
travelling = hatch.is_travelling()
real = hatch.time.time() if travelling else time.time()
print(json.dumps({
    "travelling": travelling,
    "time": time.time() - real,
    "datetime": datetime.now(UTC).timestamp() - real,
    "monotonic": time.monotonic(),
}))
"""


def clocks_of(waits: list[float]) -> list[dict[str, float | bool]]:
    """Start a child for each wait at once, with the tests' clean environment (no PAPERBELL_
    variables); what each found."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(wait)],
            env=clean_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        for wait in waits
    ]
    found = []
    for child in children:
        out, _ = child.communicate(timeout=30)
        assert child.returncode == 0
        found.append(json.loads(out))
    return found


def test_every_process_is_moved_by_the_same_amount_whenever_it_first_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FUTURE))
    monkeypatch.setenv("TEST_CLOCK_AHEAD_DAYS", str(AHEAD_DAYS))
    before = time.monotonic()
    prompt, late = clocks_of([0.0, 0.5])
    after = time.monotonic()
    ahead = AHEAD_DAYS * 86400
    for found in (prompt, late):
        assert found["travelling"]
        assert found["time"] == pytest.approx(ahead, abs=0.05)
        assert found["datetime"] == pytest.approx(ahead, abs=0.05)
        assert before < found["monotonic"] < after  # the system's monotonic clock, unmoved
    assert late["time"] == pytest.approx(prompt["time"], abs=0.05)


def test_a_relative_path_reaches_processes_started_in_another_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """PYTHONPATH=tests/support/future, as typed at the checkout's top: a process started
    in a test's own folder (a bounce piped to the command) is moved too."""
    monkeypatch.setenv("PYTHONPATH", str(FUTURE.relative_to(ROOT)))
    monkeypatch.setenv("TEST_CLOCK_AHEAD_DAYS", str(AHEAD_DAYS))
    starts_elsewhere = (
        "import subprocess, sys; "
        f"subprocess.run([sys.executable, '-c', sys.argv[1], '0'], cwd={str(tmp_path)!r}, "
        "check=True)"
    )
    done = subprocess.run(
        [sys.executable, "-c", starts_elsewhere, CHILD],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["travelling"]
    assert found["time"] == pytest.approx(AHEAD_DAYS * 86400, abs=0.05)


def test_without_the_variable_nothing_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FUTURE))
    monkeypatch.delenv("TEST_CLOCK_AHEAD_DAYS", raising=False)
    (found,) = clocks_of([0.0])
    assert not found["travelling"]
