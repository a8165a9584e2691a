"""The pages reached from every email, over real HTTP (uvicorn on loopback), with a real
SQLite (or PostgreSQL) store and mail to a real SMTP server (aiosmtpd) on loopback.

One-click unsubscribe (RFC 8058), the manage page (rules, settings, pause), double opt-in,
sign-up, and refusals: forged, expired, cross-purpose and stale tokens, forged forms."""

from __future__ import annotations

import html
import re
from email.message import EmailMessage
from urllib.parse import urlencode

import httpx
import pytest
from support.pages import SITE, START, Site, open_site
from support.servers import SinkHandler

from bot.pipeline.wiring import targets

pytestmark = pytest.mark.database


def mail_to(sink: SinkHandler, address: str) -> list[EmailMessage]:
    return [m for m in sink.messages if m["To"] == address]


def text_of(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return str(part.get_content())


def test_the_one_click_post_from_the_email_header_unsubscribes_at_once(site: Site) -> None:
    reports = site.deliver()
    assert {r.subscriber: r.status for r in reports} == {"lab": "sent", "ada": "sent"}
    (message,) = mail_to(site.sink, "ada@lab.example")
    header = message["List-Unsubscribe"]
    https = re.match(r"<(https://[^>]+)>, <mailto:", header)
    assert https, header
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    # A mail provider's POST: no cookie, no CSRF token, only the RFC 8058 body.
    answer = httpx.post(
        site.base + site.local(https.group(1)),
        content=b"List-Unsubscribe=One-Click",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 200
    assert "You are unsubscribed" in answer.text
    assert not site.subscriber("ada").active
    site.clock.advance(days=1)
    assert [r.subscriber for r in site.deliver() if r.status == "sent"] == []


def test_the_unsubscribe_page_asks_first_and_can_be_undone(site: Site) -> None:
    path = site.link("unsubscribe", "ada")
    page = site.http.get(path)
    assert page.status_code == 200
    assert "Unsubscribe?" in page.text and "a•••@lab.example" in page.text
    assert site.subscriber("ada").active  # a GET (a link scanner) changes nothing
    done = site.http.post(path, data={"List-Unsubscribe": "One-Click"})
    assert "You are unsubscribed" in done.text and not site.subscriber("ada").active
    token = re.search(r'name="csrf" value="([^"]+)"', done.text)
    assert token
    undo = site.http.post(path + "/undo", data={"csrf": token.group(1)})
    assert undo.status_code == 200 and "subscribed again" in undo.text
    assert site.subscriber("ada").active
    # Without the RFC 8058 body, a POST does nothing.
    wrong = site.http.post(path, data={"List-Unsubscribe": "yes"})
    assert wrong.status_code == 400 and site.subscriber("ada").active


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ("flip", 403, "This link is not valid"),
        ("cut", 403, "This link is not valid"),
        ("purpose", 403, "This link is not valid"),
        ("other-secret", 403, "This link is not valid"),
    ],
)
def test_forged_tokens_fail_and_show_no_ones_data(
    site: Site, change: str, status: int, words: str
) -> None:
    path = site.link("unsubscribe", "ada")
    prefix, token = path.rsplit("/", 1)
    if change == "flip":
        token = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    elif change == "cut":
        token = token[: len(token) // 2]
    elif change == "purpose":  # a manage link used as an unsubscribe link
        token = site.link("manage", "ada").rsplit("/", 1)[1]
    else:
        from bot.core.links import LinkSigner

        other = LinkSigner("another-secret-key-of-forty-characters!!", SITE, max_age={})
        token = other.token("unsubscribe", site.subscriber("ada"), now=site.clock())
    for method in ("GET", "POST"):
        answer = site.http.request(
            method, f"{prefix}/{token}", data={"List-Unsubscribe": "One-Click"}
        )
        assert answer.status_code == status, answer.text
        assert words in answer.text
        assert "ada" not in answer.text.replace("paperbell", "")
        assert "lab.example" not in answer.text
    assert site.subscriber("ada").active
    if change != "purpose":
        manage = site.http.get(f"/manage/{token}")
        assert manage.status_code == 403 and "large language models" not in manage.text


def test_an_expired_link_offers_a_fresh_one_by_email(site: Site) -> None:
    path = site.link("manage", "ada")
    site.clock.advance(days=61)
    expired = site.http.get(path)
    assert expired.status_code == 410
    assert "This link has expired" in expired.text and "a•••@lab.example" in expired.text
    assert "large language models" not in expired.text
    sent = site.post(path + "/renew", {}, page=path)
    assert sent.status_code == 200 and "A new link is on its way" in sent.text
    (notice,) = mail_to(site.sink, "ada@lab.example")
    assert notice["Subject"] == "Your link to manage your paperbell digests"
    fresh = re.search(r"https://papers\.lab\.example/manage/\S+", text_of(notice))
    assert fresh
    opened = site.http.get(site.local(fresh.group(0)))
    assert opened.status_code == 200 and "large language models" in opened.text
    # A second ask the same day sends nothing more.
    site.post(path + "/renew", {}, page=path)
    assert len(mail_to(site.sink, "ada@lab.example")) == 1


def test_the_manage_page_shows_rules_with_what_they_matched_and_edits_them(site: Site) -> None:
    path = site.link("manage", "ada")
    page = site.http.get(path)
    assert page.status_code == 200
    assert "&#34;large language models&#34; reasoning" in page.text
    assert page.text.count("Not counted yet") == 2  # counted when digests are built
    site.deliver()
    page = site.http.get(path)
    assert "counted on 28 Nov 2024" in page.text
    found = re.findall(r"Matched (\d+) of the (\d+) papers", page.text)
    assert len(found) == 2 and all(int(n) > 0 for n, _ in found), found

    added = site.post(path + "/add", {"rule": '"diffusion policy"'}, page=path)
    assert added.status_code == 303 and added.headers["location"].endswith("done=added#rules")
    assert site.subscriber("ada").rules[-1] == '"diffusion policy"'

    bad = site.post(path + "/add", {"rule": "robot AND (grasping"}, page=path)
    assert bad.status_code == 400
    assert "That rule does not parse" in bad.text and "at column" in bad.text
    assert len(site.subscriber("ada").rules) == 3

    edited = site.post(path + "/edit", {"number": "3", "rule": "ti:diffusion"}, page=path)
    assert edited.status_code == 303
    assert site.subscriber("ada").rules[2] == "ti:diffusion"
    removed = site.post(path + "/remove", {"number": "3"}, page=path)
    assert removed.status_code == 303 and len(site.subscriber("ada").rules) == 2
    site.post(path + "/remove", {"number": "2"}, page=path)
    last = site.post(path + "/remove", {"number": "1"}, page=path)
    assert last.status_code == 400 and "last rule" in last.text
    assert len(site.subscriber("ada").rules) == 1

    check = site.http.post("/rules/check", data={"rule": "a OR (b"})
    assert check.json() == {"ok": False, "message": check.json()["message"], "column": 8}
    assert site.http.post("/rules/check", data={"rule": "a OR b"}).json() == {"ok": True}


def test_the_manage_page_in_chinese(site: Site) -> None:
    """A subscriber whose language is Chinese gets the pages, their dates and the mail they
    send in Chinese; their rules, the papers' titles and what they typed stay as they are."""
    site.store.subscribers.set_schedule("ada", language="zh-CN", timezone="Asia/Shanghai")
    site.deliver()
    path = site.link("manage", "ada")
    page = site.http.get(path)
    assert page.status_code == 200
    text = page.text
    assert '<html lang="zh-Hans">' in text and "<title>你的论文摘要 · paperbell</title>" in text
    for words in ("<h1>你的论文摘要</h1>", "<h2>规则</h2>", "<h2>发送设置</h2>", "暂停摘要"):
        assert words in text, words
    assert "统计于 2024年11月28日" in text  # "counted on 28 Nov 2024", as Chinese writes it
    assert "每天 08:00（Asia/Shanghai）" in text
    assert "&#34;large language models&#34; reasoning" in text  # the rule itself, unchanged
    assert ">星期一</option>" in text and "Your paper digests" not in text
    assert '<option value="zh-CN" selected>中文（中国）</option>' in text
    assert '<option value="ja">日语</option>' in text  # the languages named in Chinese

    saved = site.post(path + "/pause", {}, page=path)
    assert saved.status_code == 303
    assert "已暂停：恢复之前不会发送摘要。" in site.http.get(saved.headers["location"]).text

    site.clock.advance(days=61)
    expired = site.http.get(path)
    assert expired.status_code == 410 and "此链接已过期" in expired.text
    sent = site.post(path + "/renew", {}, page=path)
    assert "新链接正在发送" in sent.text and "a•••@lab.example" in sent.text
    (notice,) = [m for m in mail_to(site.sink, "ada@lab.example") if "摘要的链接" in m["Subject"]]
    assert notice["Subject"] == "管理你的 paperbell 摘要的链接"
    assert text_of(notice).startswith("你好：")


def test_settings_pause_and_resume(site: Site) -> None:
    path = site.link("manage", "ada")
    saved = site.post(
        path + "/settings",
        {
            "schedule": "weekly",
            "day": "friday",
            "time": "16:30",
            "timezone": "Europe/Paris",
            "email_format": "text",
            "abstracts": "full",
            "long_emails": "one",
            "max_papers": "20",
            "similar_max": "3",
        },
        page=path,
    )
    assert saved.status_code == 303
    ada = site.subscriber("ada")
    assert ada.similar_max == 3 and ada.long_emails == "one"
    page = site.http.get(path).text
    assert 'name="long_emails" value="one" checked' in page
    assert "a long digest as one email" in page  # the status line says it
    assert '<option value="3" selected>3</option>' in site.http.get(path).text
    assert ada.schedule.describe() == "weekly on Friday at 16:30 (Europe/Paris)"
    assert (ada.email_format, ada.abstracts, ada.max_papers) == ("text", "full", 20)
    assert '<option value="20" selected>20</option>' in site.http.get(path).text
    bad = site.post(path + "/settings", {"timezone": "Mars/Olympus", "time": "25:00"}, page=path)
    assert bad.status_code == 400 and "unknown time zone" in bad.text
    neither = site.post(path + "/settings", {"long_emails": "some"}, page=path)
    assert neither.status_code == 400 and "long_emails" in neither.text
    too_many = site.post(path + "/settings", {"max_papers": "5000"}, page=path)
    assert too_many.status_code == 400 and "max_papers" in too_many.text
    assert site.subscriber("ada").max_papers == 20
    assert site.subscriber("ada").schedule.timezone == "Europe/Paris"
    # The slot already handled is left alone: a schedule change skips no papers.
    row = site.store.subscribers.get("ada")
    assert row is not None and row.last_slot is None

    assert site.post(path + "/pause", {}, page=path).status_code == 303
    assert not site.subscriber("ada").active
    assert "Resume digests" in site.http.get(path).text
    assert site.post(path + "/resume", {}, page=path).status_code == 303
    assert site.subscriber("ada").active

    site.deliver()
    (message,) = mail_to(site.sink, "ada@lab.example")
    assert message.get_content_type() == "text/plain"  # the format chosen on the page


def test_summaries_and_a_translation_are_set_and_cleared_on_the_manage_page(site: Site) -> None:
    """The form as a browser sends it: the summaries box's hidden "off" first, then "on"
    when it is checked (an unchecked box sends nothing); the translation a <select>."""
    path = site.link("manage", "ada")
    page = site.http.get(path).text
    assert 'name="summaries" value="off"' in page and 'id="summaries"' in page
    assert '<option value="none" selected>None: English only</option>' in page
    assert '<option value="zh">Chinese (Simplified)</option>' in page
    assert '<option value="zh-Hant">Chinese (Traditional)</option>' in page
    choices = page.split('<select id="language"', 1)[1].split("</select>", 1)[0]
    assert choices.count("<option value=") == 13  # English only, and 12 languages

    def save(pairs: list[tuple[str, str]]) -> httpx.Response:
        body = urlencode([*pairs, ("csrf", site.csrf(path))])
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        return site.http.post(path + "/settings", content=body, headers=form)

    saved = save([("summaries", "off"), ("summaries", "on"), ("language", "zh")])
    assert saved.status_code == 303, saved.text
    ada = site.subscriber("ada")
    assert (ada.summaries, ada.language) == (True, "zh")
    page = site.http.get(path).text
    assert 'value="on" checked' in page and '<option value="zh" selected>' in page
    # Chinese is also the page's language now (test_the_manage_page_in_chinese).
    assert '<html lang="zh-Hans">' in page
    assert "通过HTML 邮件发送，总结，中文与英文对照。" in page

    bad = save([("summaries", "off"), ("language", "xx")])
    assert bad.status_code == 400
    assert "language: language &#39;xx&#39;: no language paperbell knows by that tag" in bad.text
    assert (site.subscriber("ada").summaries, site.subscriber("ada").language) == (True, "zh")

    # A tag the list does not offer, set elsewhere: offered too, and kept by a save.
    site.store.subscribers.set_schedule("ada", language="tlh")
    page = site.http.get(path).text
    assert '<option value="tlh" selected>Klingon</option>' in page
    assert save([("summaries", "off"), ("language", "tlh")]).status_code == 303
    assert site.subscriber("ada").language == "tlh"

    assert save([("summaries", "off"), ("language", "none")]).status_code == 303
    ada = site.subscriber("ada")
    assert (ada.summaries, ada.language) == (False, None)
    assert 'value="on" checked' not in site.http.get(path).text

    # The config file's subscriber: its page says what the file sets, and changes nothing.
    lab = site.link("manage", "lab")
    refused = site.post(lab + "/settings", {"summaries": "on", "language": "ja"}, page=lab)
    assert refused.status_code == 400 and "config file" in refused.text
    assert (site.subscriber("lab").summaries, site.subscriber("lab").language) == (False, None)


def test_forms_without_a_valid_csrf_token_or_from_another_site_are_refused(site: Site) -> None:
    path = site.link("manage", "ada")
    data = {"rule": "stolen"}
    no_cookie = httpx.post(site.base + path + "/add", data={**data, "csrf": "x"})
    assert no_cookie.status_code == 403 and "cookie" in no_cookie.text
    token = site.csrf(path)
    wrong = site.http.post(path + "/add", data={**data, "csrf": token + "x"})
    assert wrong.status_code == 403
    with httpx.Client(base_url=site.base) as other_visitor:
        other_visitor.get(path)  # their own cookie, with the first visitor's token
        stolen = other_visitor.post(path + "/add", data={**data, "csrf": token})
        assert stolen.status_code == 403
    cross = site.http.post(
        path + "/add", data={**data, "csrf": token}, headers={"Origin": "https://evil.example"}
    )
    assert cross.status_code == 403 and "another site" in cross.text
    fetch_site = site.http.post(
        path + "/add", data={**data, "csrf": token}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert fetch_site.status_code == 403
    assert "stolen" not in site.subscriber("ada").rules
    assert site.http.post(path + "/add", data={**data, "csrf": token}).status_code == 303


def test_sign_up_needs_the_address_confirmed_before_any_digest(site: Site) -> None:
    form = site.http.get("/subscribe")
    assert form.status_code == 200 and 'name="email"' in form.text
    outsider = site.post("/subscribe", {"email": "eve@elsewhere.example", "rule": "robot"})
    assert outsider.status_code == 400 and "lab.example" in outsider.text
    bad_rule = site.post("/subscribe", {"email": "grace@lab.example", "rule": '"open'})
    assert bad_rule.status_code == 400 and "does not parse" in bad_rule.text
    ok = site.post("/subscribe", {"email": "grace@lab.example", "rule": "qubit cat:quant-ph"})
    assert ok.status_code == 200 and "Check your inbox" in ok.text
    grace = site.subscriber("grace")
    assert grace.email == "grace@lab.example" and not grace.email_confirmed

    reports = {r.subscriber: r for r in site.deliver()}
    assert reports["grace"].status == "skipped"  # not confirmed: no digest
    (confirm,) = mail_to(site.sink, "grace@lab.example")
    assert confirm["Subject"] == "Confirm your address for paperbell digests"
    assert confirm["List-Unsubscribe"] is None
    link = re.search(r"https://papers\.lab\.example/confirm/\S+", text_of(confirm))
    assert link
    path = site.local(link.group(0))
    page = site.http.get(path)
    assert page.status_code == 200 and "Yes, this is my address" in page.text
    assert not site.subscriber("grace").email_confirmed  # a GET confirms nothing
    done = site.post(path, {}, page=path)
    assert done.status_code == 303 and "/manage/" in done.headers["location"]
    assert site.subscriber("grace").email_confirmed
    landing = site.http.get(done.headers["location"])
    assert "Address confirmed" in landing.text

    site.clock.advance(days=1)
    reports = {r.subscriber: r for r in site.deliver()}
    assert reports["grace"].status == "sent"
    # Someone signing up an address already subscribed only makes its owner get a link.
    again = site.post("/subscribe", {"email": "ada@lab.example", "rule": "anything"})
    assert "Check your inbox" in again.text
    (notice,) = mail_to(site.sink, "ada@lab.example")[-1:]
    assert "manage your paperbell digests" in notice["Subject"]
    assert site.subscriber("ada").rules == (
        '"large language models" reasoning',
        "robot cat:cs.RO",
    )


def test_a_link_stops_working_when_the_address_changes(site: Site) -> None:
    path = site.link("manage", "ada")
    site.store.subscribers.set_email("ada", "ada@newlab.example", confirmed=True)
    gone = site.http.get(path)
    assert gone.status_code == 404 and "no longer works" in gone.text


def test_a_config_file_subscribers_unsubscribe_page_promises_no_rule_changes(site: Site) -> None:
    page = site.http.get(site.link("unsubscribe", "lab"))
    assert page.status_code == 200
    assert "lets you change your rules" not in page.text and "Write to" in page.text
    assert "lets you change your rules" in site.http.get(site.link("unsubscribe", "ada")).text


def test_a_config_file_subscriber_can_pause_but_not_edit(site: Site) -> None:
    path = site.link("manage", "lab")
    page = site.http.get(path)
    assert page.status_code == 200 and "cannot be changed on this page" in page.text
    # In the reader's words: whom to write to (the digests' sender), no "operator".
    assert 'href="mailto:' in page.text and "operator" not in page.text
    assert 'action="' + path + '/add"' not in page.text
    refused = site.post(path + "/add", {"rule": "robot"}, page=path)
    assert refused.status_code == 400 and "config file" in refused.text
    assert site.post(path + "/pause", {}, page=path).status_code == 303
    assert not site.subscriber("lab").active


def test_one_click_in_a_multipart_body_as_rfc_8058_recommends(site: Site) -> None:
    path = site.link("unsubscribe", "ada")
    answer = httpx.post(site.base + path, files={"List-Unsubscribe": (None, "One-Click")})
    assert answer.status_code == 200 and not site.subscriber("ada").active
    site.store.subscribers.set_active("ada", True, now=START)
    wrong = httpx.post(site.base + path, files={"List-Unsubscribe": (None, "Maybe")})
    assert wrong.status_code == 400 and site.subscriber("ada").active


def test_one_click_from_an_email_stops_only_the_email_of_a_slack_subscriber(site: Site) -> None:
    site.store.subscribers.add(
        "bob", email="bob@lab.example", rules=["robot"], now=START, slack_user="U0BOB"
    )
    path = site.link("unsubscribe", "bob")
    done = site.http.post(path, data={"List-Unsubscribe": "One-Click"})
    assert "Your Slack digests go on" in done.text
    bob = site.subscriber("bob")
    assert bob.active and [t.kind for t in targets(site.config, bob)] == ["slack"]
    # The undo mails a confirmation: a link is no proof of owning the address.
    token = re.search(r'name="csrf" value="([^"]+)"', done.text)
    assert token
    again = site.http.post(path + "/renew", data={"csrf": token.group(1)})
    assert "A new link is on its way" in again.text
    (notice,) = mail_to(site.sink, "bob@lab.example")
    assert "/confirm/" in text_of(notice)
    assert not site.subscriber("bob").email_confirmed


def test_a_link_dies_with_its_subscriber_even_if_the_id_comes_back(site: Site) -> None:
    site.store.subscribers.add("tmp", email=None, rules=["robot"], now=START, slack_user="U0TMP")
    old = site.link("manage", "tmp")
    old_id = site.subscriber("tmp").id
    site.store.subscribers.delete("tmp")
    site.clock.advance(seconds=5)
    site.store.subscribers.add(
        "next", email=None, rules=["qubit"], now=site.clock(), slack_user="U0NEXT"
    )
    if site.subscriber("next").id == old_id:  # SQLite gives the id again; PostgreSQL does not
        assert site.http.get(old).status_code == 404
    assert site.http.get(old).status_code in (403, 404)


def test_a_proxy_that_rewrites_host_still_accepts_forms_from_the_public_address(
    site: Site,
) -> None:
    path = site.link("manage", "ada")
    token = site.csrf(path)
    answer = site.http.post(path + "/pause", data={"csrf": token}, headers={"Origin": SITE})
    assert answer.status_code == 303 and not site.subscriber("ada").active


def test_the_sign_up_page_is_throttled_and_notices_never_pause_anyone(site: Site) -> None:
    site.sink.refuse["gone@lab.example"] = "550 5.1.1 no such user"
    for _day in range(3):  # one confirmation a day, bounced each time
        answer = site.post("/subscribe", {"email": "gone@lab.example", "rule": "robot"})
        assert answer.status_code == 200
        site.clock.advance(days=1)
    assert site.subscriber("gone").active  # notices are not digests: no bounce pause
    # "+tags" are one mailbox: one confirmation a day in all.
    for tag in ("a", "b"):
        site.post("/subscribe", {"email": f"carol+{tag}@lab.example", "rule": "robot"})
    assert len([m for m in site.sink.messages if "carol" in str(m["To"])]) == 1
    for n in range(3):
        site.post("/subscribe", {"email": f"p{n}@lab.example", "rule": "robot"})
    throttled = site.post("/subscribe", {"email": "late@lab.example", "rule": "robot"})
    assert throttled.status_code == 429 and "Too many sign-ups" in throttled.text


def test_the_manage_page_adds_and_removes_apprise_destinations_shown_masked(site: Site) -> None:
    from support.chat import chat_server

    token = "s3cr3tMattermostToken99"
    path = site.link("manage", "ada")
    page = site.http.get(path)
    assert "Chat and push destinations" in page.text and "None yet." in page.text
    bad = site.post(path + "/add-destination", {"url": "nosuch://x/y"}, page=path)
    assert bad.status_code == 400 and "Apprise cannot read that URL (nosuch://…" in bad.text
    with chat_server("ntfy") as ntfy, chat_server("mattermost") as mattermost:
        for url in (ntfy.url("papers"), mattermost.url(token)):
            added = site.post(path + "/add-destination", {"url": url}, page=path)
            assert added.status_code == 303, added.text
            assert added.headers["location"].endswith("done=destination-added#destinations")
        again = site.post(path + "/add-destination", {"url": ntfy.url("papers")}, page=path)
        assert again.status_code == 400 and "go to ntfy://127.0.0.1" in again.text
        page = site.http.get(path)
        assert f"ntfy://127.0.0.1:{ntfy.port}/papers" in page.text
        assert f"mmost://127.0.0.1:{mattermost.port}/s...9/" in page.text
        assert token not in page.text and page.text.count("added on this page") == 2

        reports = site.deliver()
        sent = {r.target for r in reports if r.subscriber == "ada" and r.status == "sent"}
        assert f"apprise ntfy://127.0.0.1:{ntfy.port}/papers" in sent
        assert ntfy.messages and mattermost.messages
        assert token not in repr(reports)

        channel = re.findall(r'name="channel" value="([^"]+)"', page.text)
        assert len(channel) == 2 and all(c.startswith("apprise:") for c in channel)
        removed = site.post(path + "/remove-destination", {"channel": channel[1]}, page=path)
        assert removed.status_code == 303
        assert [len(site.subscriber("ada").apprise)] == [1]
    lab = site.http.get(site.link("manage", "lab"))
    assert "Chat and push destinations" in lab.text and "add-destination" not in lab.text


def test_pause_on_the_manage_page_pauses_every_digest_and_resume_brings_back_the_email(
    site: Site,
) -> None:
    from support.chat import chat_server

    path = site.link("manage", "ada")
    with chat_server("ntfy") as ntfy:
        added = site.post(path + "/add-destination", {"url": ntfy.url("papers")}, page=path)
        assert added.status_code == 303
        paused = site.post(path + "/pause", {}, page=path)
        assert "Paused: no digests" in site.http.get(paused.headers["location"]).text
        ada = site.subscriber("ada")
        assert (ada.active, ada.email_confirmed) == (False, True)
        assert not [r for r in site.deliver() if r.subscriber == "ada" and r.status == "sent"]
        assert not ntfy.messages

        assert site.post(path + "/resume", {}, page=path).status_code == 303
        sent = {r.target for r in site.deliver() if r.subscriber == "ada" and r.status == "sent"}
    assert "<ada@lab.example>" in sent and ntfy.messages, sent


def test_two_subscribers_on_one_webhook_each_get_their_digest_with_their_own_url(
    site: Site,
) -> None:
    """Two URLs given on the page that differ only in their query (here a header) share a
    destination key: neither subscriber is told it is theirs already, and each digest goes
    with its own subscriber's URL."""
    from support.chat import chat_server

    site.store.subscribers.add(
        "bea",
        email="bea@lab.example",
        rules=['"large language models" reasoning', "robot cat:cs.RO"],
        now=START,
    )
    with chat_server("json") as webhook:
        for name in ("ada", "bea"):
            path = site.link("manage", name)
            url = webhook.url(f"hook?+X-Reader={name}")
            added = site.post(path + "/add-destination", {"url": url}, page=path)
            assert added.status_code == 303, added.text
        path = site.link("manage", "ada")
        mine = site.post(
            path + "/add-destination", {"url": webhook.url("hook?+X-Reader=ann")}, page=path
        )
        assert mine.status_code == 400 and "go to json://127.0.0.1" in mine.text
        reports = site.deliver()
    sent = [r.subscriber for r in reports if r.channel.startswith("apprise:")]
    assert sorted(sent) == ["ada", "bea"] and webhook.messages
    for message in webhook.messages:
        reader = {k.lower(): v for k, v in message.headers.items()}["x-reader"]
        assert site.link("manage", reader).split("?")[0] in message.text, reader


def form_fields(page: str, action: str, number: int) -> dict[str, str]:
    """What a browser posts with the page's form to `action` for rule `number`: its hidden
    fields as the page wrote them."""
    opening = rf'<form method="post" action="{re.escape(action)}"[^>]*>'
    for form in re.findall(opening + r"(.*?)</form>", page, re.S):
        hidden = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)
        fields = {html.unescape(name): html.unescape(value) for name, value in hidden}
        if fields.get("number") == str(number):
            return fields
    raise AssertionError(f"no form to {action} for rule {number}")


def test_a_double_clicked_remove_or_a_stale_page_changes_only_the_rule_it_shows(
    site: Site,
) -> None:
    path = site.link("manage", "ada")
    site.post(path + "/add", {"rule": "qubit"}, page=path)
    page = site.http.get(path).text
    remove_first = form_fields(page, path + "/remove", 1)
    for _click in range(2):  # a double click sends the form twice
        assert site.http.post(path + "/remove", data=remove_first).status_code == 303
    assert site.subscriber("ada").rules == ("robot cat:cs.RO", "qubit")

    # The page, still open, shows "robot cat:cs.RO" as rule 2: now it is rule 1.
    edit_robot = form_fields(page, path + "/edit", 2)
    edit_robot.update(rule="robot cat:cs.RO grasping", label="")
    assert site.http.post(path + "/edit", data=edit_robot).status_code == 303
    assert site.subscriber("ada").rules == ("robot cat:cs.RO grasping", "qubit")
    # Rule 1 of that page is gone: its edit changes nothing, and says so.
    edit_gone = form_fields(page, path + "/edit", 1)
    edit_gone.update(rule="reasoning", label="")
    stale = site.http.post(path + "/edit", data=edit_gone)
    assert stale.status_code == 400 and "since the page was shown" in stale.text
    assert site.subscriber("ada").rules == ("robot cat:cs.RO grasping", "qubit")


def test_the_spellings_gmail_reads_as_one_mailbox_get_one_confirmation(database_url: str) -> None:
    # Gmail reads no dots in an address's local part, and googlemail.com is gmail.com.
    spellings = (
        "ada.lovelace@gmail.com",
        "adalovelace@gmail.com",
        "a.d.a.lovelace@gmail.com",
        "Ada.Lovelace+papers@googlemail.com",
    )
    with open_site(database_url, web={"signup_domains": []}) as site:
        for address in spellings:
            answer = site.post("/subscribe", {"email": address, "rule": "robot"})
            assert answer.status_code == 200 and "Check your inbox" in answer.text
        assert [m["To"] for m in site.sink.messages] == ["ada.lovelace@gmail.com"]


def test_undo_and_confirm_say_whether_email_digests_really_come(site: Site) -> None:
    # Both said the digests would come by email while a bounce kept the email paused.
    ada = site.subscriber("ada")
    site.store.targets.pause(ada.id, "email", "mailbox unknown (5.1.1)", now=START)
    path = site.link("unsubscribe", "ada")
    done = site.http.post(path, data={"List-Unsubscribe": "One-Click"})
    token = re.search(r'name="csrf" value="([^"]+)"', done.text)
    assert token
    undo = site.http.post(path + "/undo", data={"csrf": token.group(1)})
    assert "subscribed again" in undo.text and site.subscriber("ada").active
    assert "will come to" not in undo.text and "paused" in undo.text, undo.text

    # Opening a confirmation link mailed there shows the mailbox works: email starts again.
    site.store.subscribers.stop_email("ada")
    confirm = site.link("confirm", "ada")
    landing = site.http.get(site.post(confirm, {}, page=confirm).headers["location"])
    assert "Address confirmed: your digests will come by email." in landing.text
    assert 'id="email-paused"' not in landing.text
    sent = {r.target for r in site.deliver() if r.subscriber == "ada" and r.status == "sent"}
    assert "<ada@lab.example>" in sent, sent

    # Confirmed while the subscriber paused every digest: they come once resumed.
    manage = site.link("manage", "ada")
    site.post(manage + "/pause", {}, page=manage)
    site.store.subscribers.stop_email("ada")
    confirm = site.link("confirm", "ada")
    landing = site.http.get(site.post(confirm, {}, page=confirm).headers["location"])
    assert "Address confirmed" in landing.text and "once you resume" in landing.text
    assert "your digests will come by email." not in landing.text
