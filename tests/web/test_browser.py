"""The demo email and the pages it links to, in headless Chromium (Debian's `chromium`,
driven by Playwright), as a reader would use them.

`paperbell demo --serve` runs for real (in a thread): it delivers the demo digests over SMTP
and serves the pages on loopback. The browser opens a received digest's HTML at desktop and
phone width (and in dark mode), follows its "manage" link, adds a bad and a good rule (the
live check shows the error at its column), changes the schedule, unsubscribes and undoes
it. The summaries and translations digests (the golden ones, and 50-paper ones) are opened
the same ways: nothing overflows, the Chinese and Japanese show, in a CJK font, each
translated title under its title. Screenshots are saved in test-artifacts/screenshots/
(PAPERBELL_ARTIFACTS to move it).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import ROOT

from bot.demo import free_port, run_demo

CHROMIUM = os.environ.get("PAPERBELL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("PAPERBELL_ARTIFACTS", ROOT / "test-artifacts"))
SHOTS = ARTIFACTS / "screenshots"
# What Chromium needs in a container as root, and on a machine with no network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="pip install '.[test]' installs playwright"
)
pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)),
    reason=f"no Chromium at {CHROMIUM}: install Debian's chromium (tests/system-packages.sh)",
)


class DemoServer:
    """`paperbell demo --serve`, in a thread: its mail folder and its pages' address."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.port = free_port()
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop: asyncio.Event | None = None
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _echo(self, line: str) -> None:
        self.lines.append(line)
        if line.startswith("serving the pages"):
            self.ready.set()

    def _run(self) -> None:
        async def main() -> int:
            self.loop = asyncio.get_running_loop()
            self.stop = asyncio.Event()
            return await run_demo(
                self.out_dir, echo=self._echo, web_port=self.port, serve=self.stop
            )

        try:
            self.code = asyncio.run(main())
        finally:
            self.ready.set()

    def __enter__(self) -> DemoServer:
        self.thread.start()
        assert self.ready.wait(120), self.lines
        assert self.code is None, "\n".join(self.lines)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.loop is not None and self.stop is not None:
            self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)

    def digest_html(self, local: str) -> Path:
        (found,) = sorted((self.out_dir / "mail").glob(f"{local}-*.html"))
        return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    with DemoServer(tmp_path_factory.mktemp("demo")) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def shot(page: Any, name: str, *, full_page: bool = True) -> Path:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    print(f"screenshot: {path}")
    return path


def test_the_demo_email_reads_well_at_desktop_and_phone_width(
    demo: DemoServer, browser: Any
) -> None:
    html = demo.digest_html("robotics")
    for name, width, scheme in (
        ("email-desktop", 1280, "light"),
        ("email-phone", 375, "light"),
        ("email-phone-dark", 375, "dark"),
        ("email-320", 320, "light"),
    ):
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        page = context.new_page()
        page.goto(html.as_uri())
        # Nothing sticks out sideways, even at 320 px: no horizontal scrolling.
        overflow = page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width, f"{name}: the page is {overflow} px wide"
        titles = page.locator("a[href^='https://arxiv.org/abs/']")
        assert titles.count() >= 26
        assert page.get_by_text("Thank you to arXiv for use of its open access").count() == 1
        shot(page, name)
        context.close()


def test_the_manual_s_picture_of_a_digest(demo: DemoServer, browser: Any) -> None:
    """Lin's demo digest (hf:top5) as a desktop mail client opens it, its first screen: the
    picture the manual shows (docs/images/digest.png; docs/contributing.md says how to
    refresh it)."""
    context = browser.new_context(viewport={"width": 720, "height": 900})
    page = context.new_page()
    page.goto(demo.digest_html("lin").as_uri())
    assert page.locator("[id^='paper-']").count() == 5
    assert page.evaluate("document.documentElement.scrollWidth") <= 720
    shot(page, "email-desktop-top", full_page=False)
    context.close()


# robotics-lab's 26-paper digest at 390 px wide, before the email was made light (issue
# 21): 13,784 px tall. With short abstracts, about half is the aim.
PHONE_HEIGHT_BEFORE = 13_784


def test_the_demo_email_is_about_half_as_tall_on_a_phone(demo: DemoServer, browser: Any) -> None:
    """Scrolling a 26-paper digest on a phone: about half of what it took before (each paper
    a title, one line of authors and subjects, a few lines of abstract), and nothing hidden
    that matters (every paper is there, each title linked)."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(demo.digest_html("robotics").as_uri())
    height = page.evaluate("document.documentElement.scrollHeight")
    papers = page.locator("[id^='paper-']")
    print(f"robotics-lab at 390 px: {height} px for {papers.count()} papers")
    assert papers.count() == 26
    assert page.locator("h3 a[href^='https://arxiv.org/abs/']").count() == 26
    assert height <= 0.58 * PHONE_HEIGHT_BEFORE, f"{height} px tall at 390 px"
    # No paper takes more than a phone's screen.
    tallest = max(box["height"] for box in (papers.nth(n).bounding_box() for n in range(26)))
    assert tallest < 450, tallest
    shot(page, "email-phone-height")
    context.close()


def test_show_more_opens_the_setting_on_the_manage_page(demo: DemoServer, browser: Any) -> None:
    """Ada's email shows the best 15 of 34 papers; its "show more" link opens her manage
    page at the setting of how many papers an email shows."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(demo.digest_html("ada").as_uri())
    assert page.get_by_text("The best 15 of the 34 papers that matched your rules").count() == 1
    page.get_by_role("link", name="Show more papers per email").click()
    page.wait_for_url(re.compile(r".*/manage/[^/#]*#settings$"))
    assert page.locator("#max_papers").input_value() == "15"
    context.close()


def test_the_manage_page_from_the_email_adds_rules_checks_them_and_unsubscribes(
    demo: DemoServer, browser: Any
) -> None:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    # The pages' policy runs no inline script: the live check must work as a file, and
    # nothing on the pages may be refused (Chromium reports a refusal on the console).
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.goto(demo.digest_html("ada").as_uri())
    manage = page.locator("a[href*='/manage/']").first
    assert f"localhost:{demo.port}/manage/" in str(manage.get_attribute("href"))
    with page.expect_response(re.compile(r".*/manage/[^/]*$")) as opened:
        manage.click()
    page.wait_for_url(re.compile(r".*/manage/.*"))
    policy = opened.value.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("style-src")[0]
    assert page.locator("h1").inner_text() == "Your paper digests"
    assert page.get_by_text("Matched", exact=False).count() >= 2
    shot(page, "manage-page")

    # A bad rule: the live check says what and where, before anything is sent.
    field = page.locator("#new-rule")
    field.fill("robot AND (grasping")
    check = page.locator("#new-rule-check")
    check.get_by_text("column", exact=False).wait_for()
    assert field.get_attribute("aria-invalid") == "true"
    shot(page, "manage-bad-rule-live")
    # Sent anyway, the server refuses it and shows the same error with a caret.
    page.get_by_role("button", name="Add rule").click()
    page.locator("#rule-error").wait_for()
    assert "does not parse" in page.locator("#rule-error").inner_text()
    assert "^" in page.locator("#rule-error pre").inner_text()
    shot(page, "manage-bad-rule-submitted")

    field = page.locator("#new-rule")
    field.fill('"diffusion policy" cat:cs.RO')
    page.locator("#new-rule-check").get_by_text("valid").wait_for()
    page.get_by_role("button", name="Add rule").click()
    page.get_by_text("Rule added.").wait_for()
    assert page.locator(".rule", has_text='"diffusion policy" cat:cs.RO').count() == 1

    page.locator("input[name=schedule][value=weekly]").check()
    page.locator("#day").select_option("friday")
    page.locator("#time").fill("16:30")
    page.get_by_role("button", name="Save settings").click()
    page.get_by_text("Settings saved.").wait_for()
    assert "weekly on Friday at 16:30" in page.locator("#top").inner_text()
    shot(page, "manage-after-changes")

    page.get_by_role("button", name="Unsubscribe").click()
    page.get_by_text("You are unsubscribed").wait_for()
    shot(page, "unsubscribed")
    page.get_by_role("button", name=re.compile("Undo")).click()
    page.get_by_text("You are subscribed again").wait_for()
    assert not [line for line in console if "Content Security Policy" in line], console
    assert not [line for line in console if line.startswith("pageerror")], console
    context.close()


def test_summaries_and_a_translation_are_chosen_on_the_manage_page_and_kept(
    demo: DemoServer, browser: Any
) -> None:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.goto(demo.digest_html("ada").as_uri())
    page.locator("a[href*='/manage/']").first.click()
    page.wait_for_url(re.compile(r".*/manage/.*"))
    assert page.get_by_label("A short summary in place of each abstract").count() == 1
    box = page.locator("#summaries")  # its label is in the page's language, which changes
    language = page.locator("#language")
    assert not box.is_checked() and language.input_value() == "none"
    assert "Chinese (Simplified)" in language.inner_text()

    box.check()
    language.select_option("zh")
    page.get_by_role("button", name="Save settings").click()
    # Chinese is the page's language from now on (docs/languages.md).
    page.get_by_text("设置已保存。").wait_for()
    page.reload()
    assert box.is_checked() and language.input_value() == "zh"
    assert "总结，中文与英文对照" in page.locator("#top").inner_text()
    shot(page, "manage-summaries-chinese")

    # Unchecked, the box sends nothing: its hidden "off" turns summaries off.
    box.uncheck()
    language.select_option(label="无：仅英文")
    page.get_by_role("button", name="保存设置").click()
    page.get_by_text("Settings saved.").wait_for()
    page.reload()
    assert not box.is_checked() and language.input_value() == "none"
    assert "summaries" not in page.locator("#top").inner_text()
    context.close()


def test_a_thumbs_up_in_the_email_is_recorded_shown_on_the_manage_page_and_undone(
    demo: DemoServer, browser: Any
) -> None:
    """The 👍 beside a paper in a real digest: one click records it (the page's script
    posts its form: a GET alone records nothing), the manage page lists it, Undo takes
    it back; and nothing on the way is refused by the pages' script policy."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.goto(demo.digest_html("ada").as_uri())
    first = page.locator("div[id^='paper-']").first
    title = first.locator("h3 > a").inner_text().split(". ", 1)[-1].strip()
    like = first.get_by_role("link", name="👍")
    assert f"localhost:{demo.port}/feedback/" in str(like.get_attribute("href"))
    like.click()
    page.get_by_text("Thank you: noted").wait_for()
    assert "You like" in page.locator(".notice").inner_text()
    shot(page, "feedback-recorded")

    page.get_by_role("link", name="Your liked and disliked papers").click()
    page.wait_for_url(re.compile(r".*/manage/[^/#]*#feedback$"))
    liked = page.locator("#feedback")
    assert "👍 Liked · 1" in liked.inner_text()
    assert title[:40] in liked.inner_text() and "from an email" in liked.inner_text()
    shot(page, "manage-feedback")

    # The same link again (a second click, days later): still one verdict, and Undo.
    page.goto(demo.digest_html("ada").as_uri())
    page.locator("div[id^='paper-']").first.get_by_role("link", name="👍").click()
    page.get_by_text("Thank you: noted").wait_for()
    page.get_by_role("button", name="Undo").click()
    page.get_by_role("heading", name="Taken back").wait_for()
    page.get_by_role("link", name="Your liked and disliked papers").click()
    page.wait_for_url(re.compile(r".*/manage/.*"))
    assert "None yet" in page.locator("#feedback").inner_text()

    # 👎, then removed with its button on the manage page.
    page.goto(demo.digest_html("ada").as_uri())
    page.locator("div[id^='paper-']").nth(1).get_by_role("link", name="👎").click()
    page.get_by_text("Thank you: noted").wait_for()
    page.get_by_role("link", name="Your liked and disliked papers").click()
    page.wait_for_url(re.compile(r".*/manage/.*"))
    assert "👎 Not liked · 1" in page.locator("#feedback").inner_text()
    page.locator("#feedback").get_by_role("button", name=re.compile("Remove")).click()
    page.get_by_text("Removed from your liked and disliked papers.").wait_for()
    assert "None yet" in page.locator("#feedback").inner_text()
    assert not [line for line in console if "Content Security Policy" in line], console
    assert not [line for line in console if line.startswith("pageerror")], console
    context.close()


def test_a_forged_link_gets_a_clear_page(demo: DemoServer, browser: Any) -> None:
    context = browser.new_context()
    page = context.new_page()
    response = page.goto(f"http://localhost:{demo.port}/manage/WzEsIm5vdC1yZWFsIl0.forged.sig")
    assert response is not None and response.status == 403
    assert page.locator("h1").inner_text() == "This link is not valid"
    shot(page, "forged-link")
    context.close()


# -- summaries and translations -------------------------------------------------------------


def _cjk_fonts() -> str:
    """The families fontconfig knows for Chinese (empty: none, or no fontconfig)."""
    if not shutil.which("fc-list"):
        return ""
    done = subprocess.run(
        ["fc-list", ":lang=zh", "family"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def _texts_emails(folder: Path) -> dict[str, tuple[Path, str | None]]:
    """The golden summaries and translations digests and two 50-paper ones, as HTML files:
    name -> (file, the language its translations are marked with)."""
    from support.demo_mail import CASES, demo_message
    from support.demo_texts import fifty_paper_digest

    from bot.render.email import render_digest

    found: dict[str, tuple[Path, str | None]] = {}
    for case in CASES:
        if case.texts:
            html = next(
                part.get_content()
                for part in demo_message(case).walk()
                if part.get_content_type() == "text/html"
            )
            path = folder / f"{case.name}.html"
            path.write_text(html, encoding="utf-8")
            found[case.name] = (path, case.subscriber.language)
    for name, changes in (
        ("fifty-summaries", {"summaries": True}),
        ("fifty-zh", {"language": "zh"}),
    ):
        path = folder / f"{name}.html"
        path.write_text(render_digest(fifty_paper_digest(**changes)).html, encoding="utf-8")
        found[name] = (path, changes.get("language"))
    return found


@pytest.mark.parametrize(
    ("view", "width", "scheme"),
    [("desktop", 1280, "light"), ("phone", 390, "light"), ("phone-dark", 390, "dark")],
)
def test_summaries_and_translations_read_well_at_desktop_and_phone_width(
    browser: Any, tmp_path: Path, view: str, width: int, scheme: str
) -> None:
    emails = _texts_emails(tmp_path)
    assert set(emails) == {
        "lin-summaries",
        "grace-zh",
        "lin-both-ja",
        "fifty-summaries",
        "fifty-zh",
    }
    for name, (path, language) in emails.items():
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        page = context.new_page()
        page.goto(path.as_uri())
        where = f"{name} at {width} px, {scheme}"
        # Nothing sticks out sideways: no horizontal scrolling, CJK lines included.
        wide, client = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert wide <= client, f"{where}: the page is {wide} px wide in {client}"
        titles = page.locator("h3")
        assert titles.count() >= 5
        if scheme == "dark":  # the dark-mode rules apply: light text on a dark card
            card = page.locator("table.card")
            assert card.evaluate("e => getComputedStyle(e).backgroundColor") == ("rgb(27, 30, 33)")
        if language:
            _check_translations(page, language, where)
        else:
            assert page.locator("[lang]:not(html)").count() == 0
            assert page.get_by_text("AI summaries by", exact=False).count() >= 1
        shot(page, f"texts-{name}-{view}")
        context.close()


def _check_translations(page: Any, language: str, where: str) -> None:
    """The translations are shown: marked with their language, visible, each title's right
    under it, in a font that has their characters, readable in dark mode."""
    marked = page.locator(f"[lang='{language}']")
    assert marked.count() >= 5, where
    first = marked.first
    assert first.is_visible(), where
    # The translated title is the element right after the first title, and sits under it.
    title = page.locator("h3").first
    follows = title.evaluate("e => e.nextElementSibling.getAttribute('lang')")
    assert follows == language, where
    above, below = title.bounding_box(), first.bounding_box()
    assert above is not None and below is not None
    assert above["y"] + above["height"] <= below["y"] + 1, where
    assert below["y"] - (above["y"] + above["height"]) < 24, where
    assert abs(above["x"] - below["x"]) < 2, where  # aligned, not beside it
    # Its characters are drawn with a CJK font (not boxes): what Chromium actually used.
    fonts = _cjk_fonts()
    if fonts:
        session = page.context.new_cdp_session(page)
        session.send("DOM.enable")
        session.send("CSS.enable")
        root = session.send("DOM.getDocument")["root"]["nodeId"]
        node = session.send(
            "DOM.querySelector", {"nodeId": root, "selector": f"[lang='{language}']"}
        )["nodeId"]
        used = session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        families = {font["familyName"] for font in used}
        assert any("CJK" in family for family in families), f"{where}: drawn with {families}"
        session.detach()
    colour = first.evaluate("e => getComputedStyle(e).color")
    background = page.locator("table.card").evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour != background, where


# -- the archive ------------------------------------------------------------------------------


def test_view_in_browser_opens_the_digest_in_the_archive_and_the_list(
    demo: DemoServer, browser: Any
) -> None:
    """The "View in your browser" link of a real sent email opens that very digest in the
    archive (as it was sent, under a bar back to the list: no script runs in it, nothing is
    refused); the list has it by day, and opens it again; at phone width nothing overflows."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    page.goto(demo.digest_html("ada").as_uri())
    headline = page.locator("h1").inner_text()
    titles = page.locator("h3 > a").all_inner_texts()
    view = page.get_by_role("link", name="View in your browser")
    href = str(view.get_attribute("href"))
    assert re.fullmatch(rf"http://localhost:{demo.port}/archive/[^/]+/paperbell\.[0-9a-f]+", href)
    with page.expect_response(href) as opened:
        view.click()
    page.wait_for_url(href)
    assert opened.value.status == 200
    assert page.locator("h1").inner_text() == headline
    assert page.locator("h3 > a").all_inner_texts() == titles  # the same digest, whole
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "archive-digest-phone")

    page.get_by_role("link", name=re.compile("All your past digests")).click()
    page.wait_for_url(re.compile(r".*/archive/[^/]+$"))
    assert page.locator("h1").inner_text() == "Your past digests"
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    listed = page.locator(
        f"ul.digests a[href='{href.removeprefix(f'http://localhost:{demo.port}')}']"
    )
    assert listed.count() == 1
    assert "new papers" in listed.inner_text()
    shot(page, "archive-list-phone")
    listed.click()
    page.wait_for_url(href)
    assert page.locator("h3 > a").all_inner_texts() == titles
    assert not [line for line in console if "Content Security Policy" in line], console
    assert not [line for line in console if line.startswith("pageerror")], console
    context.close()


def test_the_manage_page_links_the_archive_and_the_feed(demo: DemoServer, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(demo.digest_html("ada").as_uri())
    page.locator("a[href*='/manage/']").first.click()
    page.wait_for_url(re.compile(r".*/manage/.*"))
    section = page.locator("#archive")
    feed = section.locator("input[readonly]").input_value()
    assert re.fullmatch(rf"http://localhost:{demo.port}/feed/\d+\.[\w-]+\.atom", feed)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    section.get_by_role("link", name="Your past digests").click()
    page.wait_for_url(re.compile(r".*/archive/[^/]+$"))
    assert page.locator("ul.digests a").count() >= 1
    context.close()


# -- the rating page --------------------------------------------------------------------------


def _rating_link(demo: DemoServer, local: str) -> str:
    """The one rating link of a demo digest's plain-text part."""
    import email
    import email.policy

    (eml,) = sorted((demo.out_dir / "mail").glob(f"{local}-*.eml"))
    message = email.message_from_bytes(eml.read_bytes(), policy=email.policy.default)
    part = message.get_body(("plain",))  # type: ignore[attr-defined]
    (link,) = re.findall(rf"http://localhost:{demo.port}/rate/\S+", part.get_content())
    return str(link)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_rating_page_works_on_a_phone_without_scripts(
    demo: DemoServer, browser: Any, scheme: str
) -> None:
    """The plain-text part's rating link, opened on a phone with scripts off: the email's
    papers, each with 👍 and 👎 buttons big enough for a thumb; a press records the verdict
    and the page shows it lit; pressed again, it is taken back. Nothing overflows."""
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, java_script_enabled=False, color_scheme=scheme
    )
    page = context.new_page()
    titles = None
    page.goto(demo.digest_html("ada").as_uri())
    # The titles: a heading's own link (a Hugging Face paper's ▲ upvotes link sits beside it).
    titles = [t.split(". ", 1)[-1].strip() for t in page.locator("h3 > a").all_inner_texts()]
    link = _rating_link(demo, "ada")
    response = page.goto(link)
    assert response is not None and response.status == 200
    assert page.locator("h1").inner_text() == "Rate this email's papers"
    rated = page.locator("ol.rated > li")
    assert rated.count() == len(titles)
    assert [t.strip() for t in rated.locator("strong").all_inner_texts()] == titles
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    first = rated.first
    like = first.get_by_role("button", name="👍 Like")
    box = like.bounding_box()
    assert box is not None and box["height"] >= 44
    shot(page, f"rating-page-phone-{scheme}", full_page=False)

    like.click()
    page.wait_for_url(re.compile(r".*/rate/[^/#]+#paper-1$"))
    first = page.locator("#paper-1")
    assert "You like it" in first.inner_text()
    assert first.get_by_role("button", name="👍 Like").get_attribute("aria-pressed") == "true"
    shot(page, f"rating-page-voted-phone-{scheme}", full_page=False)
    first.get_by_role("button", name="👍 Like").click()
    page.wait_for_url(re.compile(r".*#paper-1$"))
    assert "Not rated" in page.locator("#paper-1").inner_text()
    context.close()
