"""SpamAssassin's verdict on the demo digests: every one must score below 2.0.

The messages are the golden ones (tests/support/demo_mail.py, compared in
tests/render/test_email_golden.py): each demo subscriber's digest from the bundled arXiv listing,
built by `build_message` as it is sent, From digest@papers.lab.example To the subscriber.
Each goes through `spamassassin -L -t`: local tests only (no DNS, no network), with the site
rules from the default paths and HOME set to a temporary folder, so nothing is read from or
written to the user's home. About 1.7 s a message: each is scored in a test of its own, so
that the test runner's workers score them side by side.

A rule that fires is fixed in the email, not by raising the threshold. See the scores and
the rules that hit with `pytest tests/render/test_spam.py -s`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.demo_mail import CASES, DemoCase, demo_message

THRESHOLD = 2.0
SPAMASSASSIN = shutil.which("spamassassin")
# The standard test string every SpamAssassin scores 1000: proves the rules are loaded.
GTUBE = b"XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"
# A message that is nothing but GTUBE.
CONTROL = (
    b"From: someone@example.com\r\nTo: x@example.org\r\nSubject: test\r\n\r\n" + GTUBE + b"\r\n"
)

_STATUS_RE = re.compile(r"^X-Spam-Status: (?P<value>.*?)\n(?=\S)", re.MULTILINE | re.DOTALL)
_SCORE_RE = re.compile(r"\bscore=(?P<score>-?\d+(?:\.\d+)?)")
_TESTS_RE = re.compile(r"\btests=(?P<tests>\S*)")
# A line of the report's table: " 0.0 HTML_MESSAGE  BODY: HTML included in message".
_REPORT_LINE_RE = re.compile(
    r"^\s*(?P<points>-?\d+(?:\.\d+)?)\s+(?P<rule>[A-Z0-9_]+)\s+(?P<what>.*)$"
)


@dataclass(frozen=True)
class Verdict:
    """What SpamAssassin said about one message."""

    score: float
    rules: tuple[str, ...]  # "0.0 HTML_MESSAGE BODY: HTML included in message", ...

    def describe(self) -> str:
        hits = "\n".join(f"    {rule}" for rule in self.rules) or "    (no rule hit)"
        return f"score {self.score:.1f}\n{hits}"


def parse_verdict(output: str) -> Verdict:
    """The score and rules from `spamassassin -t` output (header and report)."""
    output = output.replace("\r\n", "\n")
    status = _STATUS_RE.search(output)
    if status is None:
        raise AssertionError(f"no X-Spam-Status header in SpamAssassin's output:\n{output[:2000]}")
    value = re.sub(r"\s+", " ", status.group("value"))
    score = _SCORE_RE.search(value)
    if score is None:
        raise AssertionError(f"no score in X-Spam-Status: {value}")
    report = output.split("Content analysis details:", 1)[-1]
    rules = tuple(
        f"{m.group('points')} {m.group('rule')} {m.group('what').strip()}"
        for line in report.splitlines()
        if (m := _REPORT_LINE_RE.match(line))
    )
    if not rules and (tests := _TESTS_RE.search(value)) and tests.group("tests") != "none":
        rules = tuple(tests.group("tests").split(","))
    return Verdict(score=float(score.group("score")), rules=rules)


def score_message(message: bytes, home: Path) -> Verdict:
    assert SPAMASSASSIN is not None
    environ = {**os.environ, "HOME": str(home)}
    done = subprocess.run(
        [SPAMASSASSIN, "-L", "-t", "-x", "--siteconfigpath=/etc/spamassassin"],
        input=message,
        capture_output=True,
        env=environ,
        cwd=home,
        timeout=120,
        check=False,
    )
    output = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0 and "X-Spam-Status" not in output:
        raise AssertionError(
            f"spamassassin exited with {done.returncode}: {done.stderr.decode(errors='replace')}"
        )
    return parse_verdict(output)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """SpamAssassin's HOME for one message: a temporary folder (skips if it is not installed)."""
    if SPAMASSASSIN is None:
        pytest.skip("SpamAssassin is not installed (no `spamassassin` on PATH)")
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_demo_digest_is_not_spam(case: DemoCase, home: Path) -> None:
    verdict = score_message(demo_message(case).as_bytes(), home)
    print(f"\nSpamAssassin, {case.name}: {verdict.describe()}")
    assert verdict.score < THRESHOLD, (
        f"{case.name}: SpamAssassin scores the digest {verdict.score:.1f} "
        f"(must be below {THRESHOLD}); fix the email, not the threshold. Rules hit:\n"
        f"{verdict.describe()}"
    )


def test_spamassassin_really_scores(home: Path) -> None:
    """A control message (GTUBE) must score as spam, or the scores above mean nothing."""
    control = score_message(CONTROL, home)
    assert control.score >= 1000, control.describe()
    assert any("GTUBE" in rule for rule in control.rules)


def test_parse_verdict_reads_header_and_report() -> None:
    output = (
        "X-Spam-Checker-Version: SpamAssassin 4.0.1\n"
        "X-Spam-Status: No, score=1.3 required=5.0 tests=HTML_MESSAGE,\n"
        "\tMIME_HTML_ONLY autolearn=no version=4.0.1\n"
        "Subject: x\n\nbody\n"
        "Content analysis details:   (1.3 points, 5.0 required)\n\n"
        " pts rule name              description\n"
        "---- ---------------------- ----------------------------------\n"
        " 0.0 HTML_MESSAGE           BODY: HTML included in message\n"
        " 1.3 MIME_HTML_ONLY         BODY: Message only has text/html MIME parts\n"
    )
    verdict = parse_verdict(output)
    assert verdict.score == 1.3
    assert verdict.rules == (
        "0.0 HTML_MESSAGE BODY: HTML included in message",
        "1.3 MIME_HTML_ONLY BODY: Message only has text/html MIME parts",
    )
    assert parse_verdict("X-Spam-Status: No, score=-0.1 tests=none\nA: b\n").score == -0.1
