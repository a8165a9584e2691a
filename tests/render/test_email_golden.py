"""Golden files: the demo digests exactly as they are mailed.

What is compared
    Each demo subscriber (`bot.demo.DEMO_SUBSCRIBERS`) gets the digest the pipeline would
    build for them from the real arXiv listing and Hugging Face day bundled with the package
    (`bot.demo.bundled_papers()`, announced on `bot.demo.DEMO_DAY`, 28 November 2024, and
    `bot.demo.bundled_hf_papers()`, 21 August 2026, with their upvotes):
    the rules matched once for everyone (`bot.match.digest.match_rules`), then
    `bot.match.digest.build_digest` per subscriber, as `bot.pipeline.deliver` does. Each digest
    goes through `bot.render.message.build_message` with a fixed clock (2024-11-28 12:00
    UTC) and fixed signed links, and the result must equal the files in `tests/golden/`:

        <case>.txt       the text/plain part, decoded
        <case>.html      the text/html part, decoded (CSS inlined); absent for text-only
        <case>.headers   the message's header block as sent, and its MIME parts

    Cases: `ada`, `grace`, `robotics-lab` (HTML, short abstracts: the defaults), `ada-full`
    (`abstracts = "full"`) and `grace-text` (`email_format = "text"`: one text part); with
    summaries and translations (the hand-written texts of tests/support/demo_texts.py):
    `lin-summaries` (model, Hugging Face and missing summaries), `grace-zh` (Chinese, some
    translations missing) and `lin-both-ja` (summaries and Japanese).
    The messages are built by tests/support/demo_mail.py.

When a change is intended
    Regenerate, then read the diff before committing it:

        .venv/bin/pytest tests/render/test_email_golden.py --regenerate-golden
        git diff tests/golden/

    Open `tests/golden/*.html` in a browser to see the emails (no network needed).

`tests/render/test_spam.py` scores these same messages with SpamAssassin.
"""

from __future__ import annotations

import difflib
import email
import email.policy
import re
from email.message import EmailMessage
from pathlib import Path

import pytest
from support.demo_mail import CASES, DemoCase, demo_digests, demo_message
from support.paths import GOLDEN

from bot.demo import DEMO_SUBSCRIBERS
from bot.render.view import layout_of

REGENERATE = "--regenerate-golden"
HOW_TO_REGENERATE = (
    f"If the change is intended, regenerate the golden files and review the diff:\n"
    f"    .venv/bin/pytest tests/render/test_email_golden.py {REGENERATE}\n"
    f"    git diff tests/golden/"
)


def golden_files(message: EmailMessage) -> dict[str, str]:
    """What is checked in for one message: suffix -> text (LF line endings)."""
    raw = message.as_bytes()
    header_block = raw.split(b"\r\n\r\n", 1)[0].decode("ascii").replace("\r\n", "\n")
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    leaves = list(parsed.walk())
    structure = "\n".join(
        f"{'  ' if part is not parsed else ''}{part.get_content_type()}"
        + (f"; charset={part.get_content_charset()}" if not part.is_multipart() else "")
        + (f"; {part['Content-Transfer-Encoding']}" if part["Content-Transfer-Encoding"] else "")
        for part in leaves
    )
    files = {".headers": f"{header_block}\n\n-- MIME parts --\n{structure}\n"}
    for part in leaves:
        if part.get_content_type() == "text/plain":
            files[".txt"] = part.get_content().replace("\r\n", "\n")
        elif part.get_content_type() == "text/html":
            files[".html"] = part.get_content().replace("\r\n", "\n")
    return files


def _difference(path: Path, expected: str, actual: str) -> str:
    diff = list(
        difflib.unified_diff(
            expected.splitlines(),
            actual.splitlines(),
            f"{path.name} (checked in)",
            f"{path.name} (rendered now)",
            lineterm="",
            n=1,
        )
    )
    shown = "\n".join(line[:200] for line in diff[:40])
    more = f"\n... {len(diff) - 40} more diff lines" if len(diff) > 40 else ""
    return f"tests/golden/{path.name} differs from what the code renders now:\n{shown}{more}"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_demo_digest_matches_golden(case: DemoCase, request: pytest.FixtureRequest) -> None:
    files = golden_files(demo_message(case))
    if request.config.getoption(REGENERATE):
        GOLDEN.mkdir(exist_ok=True)
        for suffix in (".txt", ".html", ".headers"):
            path = GOLDEN / f"{case.name}{suffix}"
            if suffix in files:
                path.write_text(files[suffix], encoding="utf-8", newline="\n")
            else:
                path.unlink(missing_ok=True)
        return
    problems = []
    for suffix, actual in files.items():
        path = GOLDEN / f"{case.name}{suffix}"
        if not path.exists():
            problems.append(f"tests/golden/{path.name} is missing.")
            continue
        expected = path.read_text(encoding="utf-8")
        if expected != actual:
            problems.append(_difference(path, expected, actual))
    for suffix in {".txt", ".html", ".headers"} - files.keys():
        if (GOLDEN / f"{case.name}{suffix}").exists():
            problems.append(f"tests/golden/{case.name}{suffix} is stale: no such part now.")
    if problems:
        pytest.fail("\n\n".join([*problems, HOW_TO_REGENERATE]), pytrace=False)


def test_no_stray_golden_files() -> None:
    expected = {f"{case.name}{suffix}" for case in CASES for suffix in (".txt", ".html")}
    expected |= {f"{case.name}.headers" for case in CASES}
    stray = sorted(
        path.name
        for path in GOLDEN.glob("*")
        if path.name not in expected and not path.name.startswith(".")
    )
    assert stray == [], f"files no case renders: {stray}. {HOW_TO_REGENERATE}"


def test_golden_cases_cover_the_demo_and_the_preferences() -> None:
    names = {case.name for case in CASES}
    assert {entry["name"] for entry in DEMO_SUBSCRIBERS} <= names
    formats = {(case.subscriber.email_format, case.subscriber.abstracts) for case in CASES}
    assert {("html", "short"), ("html", "full"), ("text", "short")} <= formats
    assert any(digest.count > 5 for digest in demo_digests().values())  # a TOC is shown
    layouts = {layout_of(case.subscriber) for case in CASES}
    assert layouts == {"standard", "summaries", "translated"}
    assert any(case.subscriber.summaries and case.subscriber.language for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_demo_message_shape(case: DemoCase) -> None:
    """What the golden files must show, whatever their exact wording."""
    files = golden_files(demo_message(case))
    digest = demo_digests()[case.subscriber.name]
    text = files[".txt"]
    assert [line for line in text.splitlines() if len(line) > 72 and "://" not in line] == []
    assert "https://papers.lab.example/manage/TOKEN-" in text
    assert "https://papers.lab.example/unsubscribe/TOKEN-" in text
    # The text part: one rating page for the email's 👍 / 👎, and each paper's page; the
    # HTML part: each paper's own 👍 / 👎 (below).
    assert text.count("https://papers.lab.example/rate/TOKEN-") == 1
    assert "/feedback/" not in text
    for item in digest.items:
        assert text.count(item.paper.abs_url) == 1
    assert "Thank you to arXiv for use of its open access interoperability." in text
    assert (".html" in files) is (case.subscriber.email_format == "html")
    standard = layout_of(case.subscriber) == "standard"
    if ".html" in files:
        html = files[".html"]
        for number in range(1, digest.count + 1):
            assert f'id="paper-{number}"' in html
            # A table of contents in the standard layout only: the others are kept light.
            assert (f'href="#paper-{number}"' in html) is (digest.count > 5 and standard)
        # Short abstracts end in "…", the whole one the title's link away.
        clipped = len(re.findall(r"…</div>", html))
        assert (clipped > 0) is (case.subscriber.abstracts == "short")
        # One link per destination: the title is a paper's one link to its abstract page.
        for item in digest.items:
            assert html.count(f'href="{item.paper.abs_url}"') == 1
        assert html.count(">👍</a>") == html.count(">👎</a>") == digest.count
    headers = files[".headers"]
    assert "List-Unsubscribe-Post: List-Unsubscribe=One-Click\n" in headers
    assert "Date: Thu, 28 Nov 2024 12:00:00 +0000\n" in headers
