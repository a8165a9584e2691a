"""👍 / 👎 from an email, over real HTTP (uvicorn on loopback), a real store and the digest a
real SMTP server received: the link a digest carries opens a page that records nothing
(link scanners open every link), its form records the verdict (once: clicking again
changes nothing), the page offers Undo, and the manage page lists it with a remove
button. Each link is signed over its paper and verdict, no two of an email alike: forged,
expired, other subscribers', removed subscribers' links, and an email's link edited to
another paper or verdict change nothing.
"""

from __future__ import annotations

import base64
import re
from email.message import EmailMessage

import pytest
from support.pages import SITE, Site

from bot.core.links import LinkSigner, max_ages

pytestmark = pytest.mark.database


def ada_message(site: Site) -> EmailMessage:
    reports = site.deliver()
    assert {r.subscriber: r.status for r in reports}["ada"] == "sent"
    (message,) = [m for m in site.sink.messages if m["To"] == "ada@lab.example"]
    return message


def part(message: EmailMessage, kind: str) -> str:
    body = message.get_body((kind,))
    assert body is not None
    return str(body.get_content())


def votes(message: EmailMessage) -> list[tuple[str, str]]:
    """Each paper's (👍, 👎) links in the HTML part, in order (the text part has one link
    for them all: its rating page)."""
    html = part(message, "html")
    likes = re.findall(r'<a href="([^"]+)"[^>]*>👍</a>', html)
    dislikes = re.findall(r'<a href="([^"]+)"[^>]*>👎</a>', html)
    assert len(likes) == len(dislikes)
    return list(zip(likes, dislikes, strict=True))


def first_paper(message: EmailMessage) -> str:
    found = re.search(r"https://arxiv\.org/abs/([0-9.]+\d)", part(message, "plain"))
    assert found
    return found.group(1)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def test_every_paper_has_signed_votes_in_the_html_part(site: Site) -> None:
    message = ada_message(site)
    pairs = votes(message)
    html = part(message, "html")
    papers = len(re.findall(r'<div id="paper-\d+"', html))
    assert papers > 1 and len(pairs) == papers
    assert "/feedback/" not in part(message, "plain")  # its rating page instead
    for like, dislike in pairs:
        assert like.startswith(f"{SITE}/feedback/") and dislike.startswith(f"{SITE}/feedback/")
        assert like != dislike
        assert len(like) < 120  # two a paper, up to 50 papers, within Gmail's 102 KB
    # Each signed alone: no two of the email's links share a signature.
    signatures = {link.rpartition(".")[2] for pair in pairs for link in pair}
    assert len(signatures) == 2 * len(pairs)


def test_a_click_records_once_undo_takes_it_back(site: Site) -> None:
    message = ada_message(site)
    like, dislike = votes(message)[0]
    key = first_paper(message)
    ada = site.subscriber("ada")
    path = site.local(like)

    page = site.http.get(path)
    assert page.status_code == 200 and "data-auto-submit" in page.text
    assert '<script src="/static/feedback.js"></script>' in page.text
    assert site.store.feedback.of(ada.id) == []  # a GET (a link scanner) records nothing

    done = site.http.post(path, data={"csrf": csrf_of(page.text)})
    assert done.status_code == 303 and done.headers["location"] == path
    (given,) = site.store.feedback.of(ada.id)
    paper = site.store.papers.by_id([key])[key]
    assert (given.key, given.verdict, given.via) == (key, "like", "email")
    assert given.title == paper.title and given.text == f"{paper.title}\n\n{paper.abstract}"
    shown = site.http.get(path)
    assert "Thank you: noted" in shown.text and "Undo" in shown.text
    assert "data-auto-submit" not in shown.text  # opened again: nothing is sent again
    assert "/manage/" in shown.text

    # Clicked again later: nothing changes, not even when.
    site.clock.advance(hours=5)
    again = site.http.post(path, data={"csrf": csrf_of(shown.text)})
    assert again.status_code == 303
    assert site.store.feedback.of(ada.id) == [given]

    undone = site.http.post(path + "/undo", data={"csrf": csrf_of(shown.text)})
    assert undone.status_code == 200 and "Taken back" in undone.text
    assert site.store.feedback.of(ada.id) == []

    # 👍 then 👎 on the same paper: one verdict, the last; undoing the 👍 leaves the 👎.
    for link in (like, dislike):
        opened = site.http.get(site.local(link))
        site.http.post(site.local(link), data={"csrf": csrf_of(opened.text)})
    (last,) = site.store.feedback.of(ada.id)
    assert last.verdict == "dislike"
    site.http.post(path + "/undo", data={"csrf": csrf_of(opened.text)})
    assert [f.verdict for f in site.store.feedback.of(ada.id)] == ["dislike"]


def test_undo_of_a_click_that_replaced_another_puts_that_one_back(site: Site) -> None:
    message = ada_message(site)
    like, dislike = votes(message)[0]
    ada = site.subscriber("ada")
    opened = site.http.get(site.local(dislike))
    site.http.post(site.local(dislike), data={"csrf": csrf_of(opened.text)})
    (first,) = site.store.feedback.of(ada.id)
    site.clock.advance(hours=1)
    asked = site.http.get(site.local(like))
    assert "in place of your earlier 👎" in asked.text
    site.http.post(site.local(like), data={"csrf": csrf_of(asked.text)})
    assert [f.verdict for f in site.store.feedback.of(ada.id)] == ["like"]
    undone = site.http.post(site.local(like) + "/undo", data={"csrf": csrf_of(asked.text)})
    assert undone.status_code == 200 and "Taken back: your 👎 on" in undone.text
    assert site.store.feedback.of(ada.id) == [first]  # the 👎 as it was, its time too


def test_the_manage_page_lists_verdicts_and_removes_them(site: Site) -> None:
    message = ada_message(site)
    (like, _), (_, dislike) = votes(message)[:2]
    for link in (like, dislike):
        opened = site.http.get(site.local(link))
        site.http.post(site.local(link), data={"csrf": csrf_of(opened.text)})
    manage = site.link("manage", "ada")
    page = site.http.get(manage)
    assert "👍 Liked · 1" in page.text and "👎 Not liked · 1" in page.text
    assert "from an email" in page.text and "28 Nov 2024" in page.text
    ada = site.subscriber("ada")
    liked = next(f for f in site.store.feedback.of(ada.id) if f.verdict == "like")
    # Without the page's token, nothing goes.
    forged = site.http.post(manage + "/forget", data={"key": liked.key, "csrf": "x"})
    assert forged.status_code == 403 and len(site.store.feedback.of(ada.id)) == 2
    removed = site.post(manage + "/forget", {"key": liked.key}, page=manage)
    assert removed.status_code == 303 and removed.headers["location"].endswith("#feedback")
    assert [f.verdict for f in site.store.feedback.of(ada.id)] == ["dislike"]
    assert "Removed from your liked" in site.http.get(removed.headers["location"]).text


def _token(site: Site, name: str, key: str, verdict: str = "like") -> str:
    """A feedback token, as an email's link and a Slack button carry it."""
    signer = site.config.web.link_signer()
    assert signer is not None
    sub, now = site.subscriber(name), site.clock()
    token = signer.feedback_token(sub, key, verdict, now=now)  # type: ignore[arg-type]
    assert token is not None
    return token


def _edited(
    token: str,
    subscriber_id: int | None = None,
    paper: str | None = None,
    verdict: str | None = None,
) -> str:
    """The token with another subscriber's id, paper or verdict ("l", "d") in its body (its
    signature kept)."""
    body, _, rest = token.partition(".")
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    number, code, key = raw.split("\n", 2)
    text = f"{subscriber_id or number}\n{verdict or code}\n{paper or key}"
    changed = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    return f"{changed}.{rest}"


def _key(link: str) -> str:
    """The paper key a feedback link's token names."""
    body = link.rsplit("/", 1)[1].partition(".")[0]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode().split("\n", 2)[2]


@pytest.mark.parametrize("change", ["flip", "cut", "other-subscriber", "other-secret", "manage"])
def test_forged_feedback_links_change_nothing(site: Site, change: str) -> None:
    ada, lab = site.subscriber("ada"), site.subscriber("lab")
    token = _token(site, "ada", "2411.18179")
    if change == "flip":
        token = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    elif change == "cut":
        token = token[: len(token) // 2]
    elif change == "other-subscriber":  # ada's link made to name lab
        token = _edited(token, lab.id)
    elif change == "other-secret":
        other = LinkSigner(
            "another-secret-key-of-forty-characters!!",
            SITE,
            max_age=max_ages(manage_days=1, unsubscribe_days=1, confirm_days=1),
        )
        token = other.feedback_token(ada, "2411.18179", "like", now=site.clock()) or ""
    else:  # a manage link's token is no feedback token
        token = site.link("manage", "ada").rsplit("/", 1)[1]
    page = site.http.get(f"/feedback/{token}")
    assert page.status_code == 403 and "This link is not valid" in page.text
    assert "lab.example" not in page.text
    form = site.http.post(
        f"/feedback/{token}", data={"csrf": site.csrf(site.link("manage", "lab"))}
    )
    assert form.status_code == 403
    assert site.store.feedback.of(ada.id) == [] and site.store.feedback.of(lab.id) == []


def test_an_email_link_edited_to_another_paper_or_verdict_is_refused(site: Site) -> None:
    """An email's 👍 link, edited to its 👎, to another paper of the same email, to a paper
    never sent, or to a key no link could name: refused as forged, recording nothing. The
    link as sent still records its own verdict."""
    message = ada_message(site)
    links = votes(message)
    assert len(links) >= 2
    token = site.local(links[0][0]).removeprefix("/feedback/")
    page = site.http.get(f"/feedback/{token}")
    assert page.status_code == 200
    ada = site.subscriber("ada")
    edits = {
        "the other verdict": _edited(token, verdict="d"),
        "another paper sent": _edited(token, paper=_key(links[1][0])),
        "both": _edited(token, paper=_key(links[1][0]), verdict="d"),
        "a paper never sent": _edited(token, paper="2401.99999"),
        "a NUL in its key": _edited(token, paper="2401\x0099999"),
        "a key too long": _edited(token, paper="x" * 201),
    }
    for what, edited in edits.items():
        opened = site.http.get(f"/feedback/{edited}")
        assert opened.status_code == 403 and "This link is not valid" in opened.text, what
        posted = site.http.post(f"/feedback/{edited}", data={"csrf": csrf_of(page.text)})
        assert posted.status_code == 403, what
    assert site.store.feedback.of(ada.id) == []
    assert (
        site.http.post(f"/feedback/{token}", data={"csrf": csrf_of(page.text)}).status_code == 303
    )
    assert [(f.key, f.verdict) for f in site.store.feedback.of(ada.id)] == [
        (_key(links[0][0]), "like")
    ]


def test_an_expired_feedback_link_records_nothing_and_offers_a_fresh_link(site: Site) -> None:
    path = f"/feedback/{_token(site, 'ada', '2411.18179')}"
    site.clock.advance(days=729)
    assert site.http.get(path).status_code == 200  # two years: old digests still work
    site.clock.advance(days=2)
    expired = site.http.get(path)
    assert expired.status_code == 410 and "This link has expired" in expired.text
    posted = site.http.post(path, data={"csrf": csrf_of(expired.text)})
    assert posted.status_code == 410
    assert site.store.feedback.of(site.subscriber("ada").id) == []
    sent = site.http.post(path + "/renew", data={"csrf": csrf_of(expired.text)})
    assert sent.status_code == 200 and "A new link is on its way" in sent.text


def test_a_removed_subscribers_link_no_longer_works(site: Site) -> None:
    path = f"/feedback/{_token(site, 'ada', '2411.18179')}"
    ada = site.subscriber("ada")
    site.store.subscribers.delete("ada")
    page = site.http.get(path)  # answered as a forged link: no id is told to exist or not
    assert page.status_code == 403 and "the subscription it was made for is gone" in page.text
    csrf = site.csrf(site.link("manage", "lab"))
    assert site.http.post(path, data={"csrf": csrf}).status_code == 403
    assert site.store.feedback.of(ada.id) == []


def test_a_paper_no_longer_stored_is_recorded_by_its_key(site: Site) -> None:
    path = f"/feedback/{_token(site, 'ada', '2401.99999', 'dislike')}"
    page = site.http.get(path)
    assert page.status_code == 200 and "2401.99999" in page.text
    site.http.post(path, data={"csrf": csrf_of(page.text)})
    (given,) = site.store.feedback.of(site.subscriber("ada").id)
    assert (given.key, given.verdict, given.title, given.text) == ("2401.99999", "dislike", "", "")
    assert "2401.99999" in site.http.get(site.link("manage", "ada")).text


def test_a_cross_site_post_records_nothing(site: Site) -> None:
    path = f"/feedback/{_token(site, 'ada', '2411.18179')}"
    page = site.http.get(path)
    answer = site.http.post(
        path, data={"csrf": csrf_of(page.text)}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert answer.status_code == 403
    assert site.store.feedback.of(site.subscriber("ada").id) == []


@pytest.mark.parametrize(
    "token",
    ["x" * 5000, "%00%00", "%E2%80%AE.%F0%9F%91%8D.x", "MTIK%0AbAo.Z0eygA.AAAA", "a.b.c", "..."],
)
def test_hostile_tokens_get_a_page_never_an_error(site: Site, token: str) -> None:
    csrf = site.csrf(site.link("manage", "lab"))
    for method, path in (("GET", ""), ("POST", ""), ("POST", "/undo"), ("POST", "/renew")):
        answer = site.http.request(method, f"/feedback/{token}{path}", data={"csrf": csrf})
        assert 400 <= answer.status_code < 500, (method, path, answer.status_code)


def test_a_dislike_from_the_email_moves_that_paper_down_in_the_next_digest(site: Site) -> None:
    """👍 on three papers of the email, then 👎 on its first, each clicked from the email as
    its reader would: the next digest of those papers (its preview, as `digest --out`
    builds it) ranks the disliked paper lower than the likes alone did."""
    import asyncio

    from bot.match.digest import build_digest, match_rules
    from bot.pipeline.similar import rank_subscribers
    from bot.pipeline.wiring import embeddings_endpoint
    from bot.rules import parse_rule

    message = ada_message(site)
    text = part(message, "plain")
    keys = list(dict.fromkeys(re.findall(r"https://arxiv\.org/abs/([0-9.]+\d)", text)))
    pairs = votes(message)
    assert len(keys) == len(pairs) >= 5

    def click(link: str) -> None:
        path = site.local(link)
        opened = site.http.get(path)
        assert site.http.post(path, data={"csrf": csrf_of(opened.text)}).status_code == 303

    def next_digest() -> list[str]:
        ada = site.subscriber("ada")
        rules = [parse_rule(r) for r in ada.rules]
        papers = site.store.papers.announced_since(site.clock().date())
        matches = match_rules(rules, papers)
        run = asyncio.run(
            rank_subscribers(
                embeddings_endpoint(site.config),
                site.store,
                [(ada, rules)],
                papers,
                matches,
                now=site.clock(),
            )
        )
        digest = build_digest(
            ada,
            rules,
            papers,
            delivered={},  # the same papers again: what changed is the ranking alone
            now=site.clock(),
            matches=matches,
            ranking=run.rankings.get(ada.id),
        )
        assert digest is not None
        return [item.paper.id for item in digest.items if item.similar_to is None]

    for like, _ in pairs[2:5]:
        click(like)
    liked_only = next_digest()
    first = keys[0]
    click(pairs[0][1])  # 👎 on the email's first paper
    (disliked,) = [f for f in site.store.feedback.of(site.subscriber("ada").id) if not f.liked]
    assert (disliked.key, disliked.via) == (first, "email")
    after = next_digest()
    assert sorted(after) == sorted(liked_only)  # the same papers ...
    assert after.index(first) > liked_only.index(first)  # ... the disliked one lower
