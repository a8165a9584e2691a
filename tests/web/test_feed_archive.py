"""The personal Atom feed (`/feed/TOKEN.atom`) and the digest archive (`/archive/TOKEN`), over
real HTTP (uvicorn on loopback) after real deliveries (SMTP to aiosmtpd on loopback), with a
real SQLite (or PostgreSQL) store: the feed is valid Atom (RFC 4287's RELAX NG schema) and
lists every paper delivered, never another subscriber's; conditional GET answers 304; the
archive lists the digests and shows each as it was sent; the email's "view in browser"
link opens that very digest; hostile tokens get a refusal, never a crash."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.atom import parsed_feed
from support.pages import SITE, Site, archive_path, body, emailed_papers, feed_path, mail_to

from bot.core.models import Paper
from bot.demo import bundled_papers
from bot.store import Store

pytestmark = pytest.mark.database


def sent_ids(store: Store, subscriber_id: int) -> set[str]:
    return {each.paper.id for each in store.archive.delivered(subscriber_id, limit=10_000)}


def send_by_slack(
    site: Site, subscriber_id: int, papers: list[Paper], *, digest_id: str, channel: str = "slack"
) -> None:
    """A Slack digest of `papers` (or a message on `channel`), queued and sent as the outbox
    records one."""
    when = site.clock() + timedelta(hours=1)
    outbox = site.store.outbox.enqueue(
        subscriber_id,
        channel=channel,
        period=digest_id,
        digest_id=digest_id,
        recipient="#papers",
        payload=b'{"messages": []}',
        sent=papers,
        now=when,
    )
    assert outbox is not None
    [item] = site.store.outbox.claim("t", now=when, lease=timedelta(minutes=1))
    assert site.store.outbox.mark_sent(item.id, owner="t", now=when)


def test_the_feed_lists_every_paper_delivered_and_no_one_elses(site: Site) -> None:
    reports = site.deliver()
    assert {r.subscriber: r.status for r in reports} == {"lab": "sent", "ada": "sent"}
    (ada_mail,) = mail_to(site, "ada@lab.example")
    (lab_mail,) = mail_to(site, "lab@lab.example")
    # The footer's feed link, in both parts, is the one the manage page gives.
    path = feed_path(site, "ada")
    assert SITE + path in body(ada_mail, "plain") and SITE + path in body(ada_mail, "html")
    manage = site.http.get(site.link("manage", "ada"))
    assert SITE + path in manage.text and SITE + archive_path(site, "ada") in manage.text

    answer = site.http.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/atom+xml; charset=utf-8"
    assert answer.headers["cache-control"] == "private, no-cache"
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    feed = parsed_feed(answer.content)
    listed = {entry.link.rsplit("/", 1)[1] for entry in feed.entries}
    ada = site.subscriber("ada")
    assert listed == emailed_papers(ada_mail) == sent_ids(site.store, ada.id)
    assert len(listed) == len(feed.entries)  # each paper once
    # Never lab's: a paper sent to lab alone (here, by Slack) stays out of ada's feed.
    lab = site.subscriber("lab")
    only_lab = next(p for p in bundled_papers() if p.id not in listed)
    send_by_slack(site, lab.id, [only_lab], digest_id="paperbell.lab-slack")
    assert only_lab.id in sent_ids(site.store, lab.id)
    again = parsed_feed(site.http.get(path).content)
    assert {entry.link.rsplit("/", 1)[1] for entry in again.entries} == listed
    assert [link.href for link in feed.feed.links if link.rel == "self"] == [SITE + path]
    assert feed.feed.title == "paperbell: papers for ada"

    lab_feed = parsed_feed(site.http.get(feed_path(site, "lab")).content)
    assert {e.link.rsplit("/", 1)[1] for e in lab_feed.entries} == emailed_papers(lab_mail) | {
        only_lab.id
    }


def test_conditional_get_answers_304_until_a_new_delivery(site: Site) -> None:
    site.deliver()
    path = feed_path(site, "ada")
    first = site.http.get(path)
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert re.fullmatch(r'"[0-9a-f]{32}"', etag) and modified.endswith(" GMT")
    for headers in (
        {"If-None-Match": etag},
        {"If-None-Match": f'"other", W/{etag}'},
        {"If-None-Match": "*"},
        {"If-Modified-Since": modified},
    ):
        again = site.http.get(path, headers=headers)
        assert again.status_code == 304, headers
        assert again.content == b"" and again.headers["etag"] == etag
    assert site.http.get(path, headers={"If-None-Match": '"other"'}).status_code == 200
    early = site.http.get(path, headers={"If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"})
    assert early.status_code == 200
    # If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2).
    both = {"If-None-Match": '"other"', "If-Modified-Since": modified}
    assert site.http.get(path, headers=both).status_code == 200
    assert site.http.head(path, headers={"If-None-Match": etag}).status_code == 304

    # A digest with a paper ada has not had yet changes the feed.
    site.store.subscribers.add_rule("ada", "quantum", now=site.clock())
    site.clock.advance(days=1)
    assert {r.subscriber: r.status for r in site.deliver()}["ada"] == "sent"
    changed = site.http.get(path, headers={"If-None-Match": etag, "If-Modified-Since": modified})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert len(parsed_feed(changed.content).entries) > len(parsed_feed(first.content).entries)


def test_feed_and_archive_links_end_with_the_subscription_and_an_address_change(
    site: Site,
) -> None:
    site.deliver()
    feed, archive = feed_path(site, "ada"), archive_path(site, "ada")
    assert site.http.get(feed).status_code == site.http.get(archive).status_code == 200
    site.store.subscribers.set_active("ada", False, now=site.clock())
    for path in (feed, archive):
        stopped = site.http.get(path)
        assert stopped.status_code == 410 and "This subscription is stopped" in stopped.text
        assert "large language models" not in stopped.text
    site.store.subscribers.set_active("ada", True, now=site.clock())  # resumed: works again
    assert site.http.get(feed).status_code == 200
    site.store.subscribers.set_email("ada", "ada@elsewhere.example", confirmed=True)
    for path in (feed, archive):
        assert site.http.get(path).status_code == 403  # made for the old address
    assert site.http.get(feed_path(site, "ada")).status_code == 200  # the new link works


def test_forged_cut_crossed_and_foreign_tokens_are_refused(site: Site) -> None:
    site.deliver()
    feed, archive = feed_path(site, "ada"), archive_path(site, "ada")
    token = feed.removeprefix("/feed/").removesuffix(".atom")
    archive_token = archive.removeprefix("/archive/")
    lab_token = feed_path(site, "lab").removeprefix("/feed/").removesuffix(".atom")
    signature = token.split(".")[1]
    for bad, status in (
        (token[:-2] + ("AA" if not token.endswith("AA") else "BB"), 403),
        (token[: len(token) // 2], 403),
        (f"{lab_token.split('.')[0]}.{signature}", 403),  # lab's id, ada's signature
        (archive_token, 403),  # the archive's token opens no feed
        ("999999." + signature, 403),  # no such subscriber: as a forged one
        (site.link("manage", "ada").rsplit("/", 1)[1], 403),
    ):
        answer = site.http.get(f"/feed/{bad}.atom")
        assert answer.status_code == status, bad
        assert "ada" not in answer.text.replace("paperbell", "") and "<entry" not in answer.text
    assert site.http.get(f"/archive/{token}").status_code == 403  # the feed's opens no archive


@settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    deadline=None,
)
@given(
    st.one_of(
        st.text(min_size=1),
        st.text(alphabet="0123456789.", min_size=1, max_size=40),
        st.from_regex(r"[0-9]{1,3}\.[A-Za-z0-9_-]{10,60}", fullmatch=True),
    )
)
@example("\x00")
@example("1." + "A" * 20_000)  # huge
@example("1.\u202egpj.exe\ufeff")
@example("٣.abc")  # a digit to str.isdigit, not to us
@example("..")
@example("%00")
@example("58777932689")  # a subscriber id past PostgreSQL's 32-bit ids
@example("0/")  # a slash: no route, and no redirect either
def test_hostile_tokens_are_refused_never_a_crash(site: Site, token: str) -> None:
    quoted = quote(token, safe="")
    for path in (f"/feed/{quoted}.atom", f"/archive/{quoted}", f"/archive/{quoted}/paperbell.x"):
        answer = site.http.get(path)
        assert answer.status_code in (400, 403, 404, 410, 414), (path, answer.status_code)
        assert "Traceback" not in answer.text


@pytest.mark.parametrize(
    "digest_id",
    ["\x00", "paperbell.\x00", "a" * 10_000, "é", "paperbell.%2e%2e", "' OR 1=1 --"],
)
def test_a_hostile_digest_id_in_a_genuine_archive_link_is_not_found(
    site: Site, digest_id: str
) -> None:
    answer = site.http.get(f"{archive_path(site, 'ada')}/{quote(digest_id, safe='')}")
    assert answer.status_code == 404 and "No such digest" in answer.text


def test_the_archive_lists_the_digests_and_view_in_browser_opens_the_one_sent(
    site: Site,
) -> None:
    site.deliver()
    (message,) = mail_to(site, "ada@lab.example")
    html, text = body(message, "html"), body(message, "plain")
    view = re.search(r'href="(https://[^"]+/archive/[^"]+)">View in your browser', html)
    assert view and view.group(1) in text.split("\n\n")[0]  # near the top of both parts
    page = site.http.get(site.local(view.group(1)))
    assert page.status_code == 200
    # The email as it was sent, under a bar back to the list; no script may run in it.
    shown = re.sub(
        r'<div style="margin:0;padding:10px.*?</div>', "", page.text, count=1, flags=re.S
    )
    assert shown.replace("\r\n", "\n") == html.replace("\r\n", "\n")
    assert "All your past digests" in page.text
    policies = page.headers.get_list("content-security-policy")
    assert len(policies) == 2 and policies[0].startswith("sandbox")
    assert page.headers["cache-control"] == "no-store"

    listing = site.http.get(archive_path(site, "ada"))
    assert listing.status_code == 200
    assert message["Subject"] in listing.text.replace("&#34;", '"').replace("&#39;", "'")
    assert "Thursday 28 November 2024" in listing.text and "Email" in listing.text
    link = re.search(r'<a href="(/archive/[^"]+/paperbell\.[0-9a-f]+)">', listing.text)
    assert link and SITE + link.group(1) == view.group(1)
    # Mail that is no digest (a confirmation, a fresh link) is never listed.
    send_by_slack(site, site.subscriber("ada").id, [], digest_id="link-1", channel="notice")
    again = site.http.get(archive_path(site, "ada"))
    assert len(re.findall(r'<a href="/archive/[^"]+/[^"]+">', again.text)) == 1
    assert site.http.get(f"{archive_path(site, 'ada')}/link-1").status_code == 404

    # lab's digest is not in ada's archive, by id or otherwise.
    lab_text = body(mail_to(site, "lab@lab.example")[0], "plain")
    lab_view = re.search(r"/archive/[^/]+/(paperbell\.[0-9a-f]+)", lab_text)
    assert lab_view
    crossed = site.http.get(f"{archive_path(site, 'ada')}/{lab_view.group(1)}")
    assert crossed.status_code == 404 and "No such digest" in crossed.text


def test_a_plain_text_email_and_a_slack_digest_are_shown_too(site: Site) -> None:
    site.store.subscribers.set_schedule("ada", email_format="text")
    site.deliver()
    (message,) = mail_to(site, "ada@lab.example")
    assert message.get_content_type() == "text/plain"
    view = re.search(r"https://\S+/archive/\S+", body(message, "plain"))
    assert view
    page = site.http.get(site.local(view.group(0)))
    assert page.status_code == 200 and '<pre class="mail">' in page.text
    assert "View in your browser" in page.text and "Email · sent" in page.text

    # A Slack digest (queued and sent as the outbox does): its papers, as stored now.
    ada = site.subscriber("ada")
    papers = [each.paper for each in site.store.archive.delivered(ada.id)][:2]
    send_by_slack(site, ada.id, papers, digest_id="paperbell.slack1")
    listing = site.http.get(archive_path(site, "ada"))
    assert "2 papers" in listing.text and "Slack" in listing.text
    slack = site.http.get(f"{archive_path(site, 'ada')}/paperbell.slack1")
    assert slack.status_code == 200 and "Slack · sent" in slack.text
    for paper in papers:
        assert f'href="https://arxiv.org/abs/{paper.id}"' in slack.text

    # A digest to a chat service (an Apprise target): named by its kind, not its key.
    send_by_slack(site, ada.id, papers, digest_id="paperbell.chat1", channel="apprise:0123456789ab")
    listing = site.http.get(archive_path(site, "ada"))
    assert "Chat / push" in listing.text and "0123456789" not in listing.text


def test_each_part_of_a_digest_sent_in_parts_opens_its_own_page(site: Site) -> None:
    """Full abstracts of 147 papers come in numbered parts: the "view in browser" link
    and the rating link of every part, the first too, open that very part."""
    site.store.subscribers.add(
        "mia", email="mia@lab.example", rules=["cat:cs.LG"], now=site.clock(), max_papers=200
    )
    site.store.subscribers.set_schedule("mia", abstracts="full", long_emails="parts")
    site.deliver()
    parts = mail_to(site, "mia@lab.example")
    assert len(parts) >= 2
    for message in parts:
        html, text = body(message, "html"), body(message, "plain")
        view = re.search(r'href="(https://[^"]+/archive/[^"]+)">View in your browser', html)
        assert view, message["Subject"]
        page = site.http.get(site.local(view.group(1)))
        assert page.status_code == 200, message["Subject"]
        assert emailed_papers(message) <= set(re.findall(r"arxiv\.org/abs/([^\"<\s]+)", page.text))
        (rating,) = re.findall(rf"{SITE}/rate/\S+", text)
        rate = site.http.get(site.local(rating))
        assert rate.status_code == 200, message["Subject"]
        listed = set(re.findall(r'name="paper" value="([^"]+)"', rate.text))
        assert listed == emailed_papers(message)
