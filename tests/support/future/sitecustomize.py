"""The "two years ahead" switch: every Python process runs with its wall clock moved ahead.

With this folder on PYTHONPATH and TEST_CLOCK_AHEAD_DAYS set (a number of days, fractions
allowed), every Python process starts with `time_machine.travel(now + that many days,
tick=True)` under way: the test process, and every Python process it starts (each finds this
file on the PYTHONPATH it inherits), all moved by the same amount. time.time, datetime.now and
date.today read the moved clock and go on ticking; monotonic clocks and sleeps are left
alone, so timeouts and waits behave as usual. A test that reads the real date where it
should use its own fixed clock then fails (a certificate, a signature, a token, a lease, a
"today" that is not the test's).

The whole suite this way (time-machine is imported before pytest starts, so pytest cannot
rewrite its asserts, and says so):

    PYTHONPATH=tests/support/future TEST_CLOCK_AHEAD_DAYS=730 \
        .venv/bin/pytest -W ignore::pytest.PytestAssertRewriteWarning -n 2 -p no:cacheprovider

The variable has no PAPERBELL_ prefix on purpose: tests start the command with those
variables removed (support.cli.clean_env), and its processes must be moved too. Without the
variable this file does nothing. libfaketime is no substitute: 0.9.10 hangs Python's timed
waits. tests/project/test_clock_switch.py checks the switch.
"""

from __future__ import annotations

import os

AHEAD_DAYS = "TEST_CLOCK_AHEAD_DAYS"


def _travel() -> None:
    days = os.environ.get(AHEAD_DAYS, "").strip()
    if not days:
        return
    # A relative entry (PYTHONPATH=tests/support/future) would be lost to a process started
    # in another folder (a test's tmp_path): its children get this one's folders, absolute.
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    os.environ["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else p for p in paths)
    import time
    from datetime import timedelta

    import time_machine

    # Started, never stopped: it lasts as long as the process.
    time_machine.travel(timedelta(days=float(days)), tick=True).start()
    # time-machine's clock starts ticking at its first reading, not at `start()`: until
    # then it stands still. Read now, or a process would lag by however long its imports
    # take before it first asks the time (a second or more), and the processes of one
    # run would disagree by that much (a lease taken over too early).
    time.time()


_travel()
