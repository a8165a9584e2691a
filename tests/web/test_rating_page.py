"""The plain-text part's one rating link, over real HTTP (uvicorn on loopback), a real
store and the digests a real SMTP server received: the text part carries it once, and
otherwise one URL a paper (at most 1.5 a paper over a whole digest of the bundled real
day, with [web] public_url and a secret key set); the page it opens lists that email's
papers, records nothing on a GET, records a 👍 or 👎 from a plain form as a paper's own
link does, shows it, and takes it back; an edited, foreign, expired or unknown link and a
hostile form change nothing."""

from __future__ import annotations

import base64
import re
from email.message import EmailMessage

import pytest
from support.pages import SITE, Site, body, mail_to

pytestmark = pytest.mark.database

URL = re.compile(r"https?://[^\s<>\"]+")
ABS = re.compile(r"https://arxiv\.org/abs/(\S+?)(?=\s)")
ARCHIVED = re.compile(r"/archive/[^/\s]+/(paperbell\.[0-9a-f]+)")  # the email's digest id


def delivered(site: Site, names: tuple[str, ...] = ("ada", "lab")) -> dict[str, EmailMessage]:
    reports = site.deliver()
    assert {r.subscriber: r.status for r in reports} == dict.fromkeys(names, "sent")
    return {name: mail_to(site, f"{name}@lab.example")[0] for name in names}


def rating_path(message: EmailMessage) -> str:
    (link,) = re.findall(rf"{SITE}/rate/\S+", body(message, "plain"))
    return link[len(SITE) :]


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def vote(site: Site, path: str, paper: str, verdict: str, *, field: str = "verdict") -> int:
    page = site.http.get(path)
    answer = site.http.post(path, data={"csrf": csrf_of(page.text), "paper": paper, field: verdict})
    return answer.status_code


def verdicts(site: Site, name: str) -> dict[str, str]:
    return {f.key: f.verdict for f in site.store.feedback.of(site.subscriber(name).id)}


def test_the_text_part_has_one_rating_link_and_at_most_one_and_a_half_urls_a_paper(
    site: Site,
) -> None:
    """Each email: its rating link once. A whole digest of the bundled day (ada's; mia's,
    twenty papers of cs.LG, as the "From the arXiv" example has): at most 1.5 URLs a paper,
    counting every URL of the text part (the footer's included)."""
    site.store.subscribers.add(
        "mia", email="mia@lab.example", rules=["cat:cs.LG"], now=site.clock(), max_papers=20
    )
    messages = delivered(site, ("ada", "lab", "mia"))
    for name, message in messages.items():
        text = body(message, "plain")
        papers = ABS.findall(text)
        assert text.count(f"{SITE}/rate/") == 1, name
        if name == "lab":  # two papers: the footer's links outnumber them
            continue
        assert len(papers) >= 15, name  # a whole digest of the bundled day
        assert "/feedback/" not in text, name
        urls = URL.findall(text)
        assert len(urls) / len(papers) <= 1.5, (name, len(urls), len(papers))
        assert len(set(papers)) == len(papers)  # one URL a paper: its page
        assert len(rating_path(message)) < 80  # short: about a feedback link's length
        # The HTML part keeps each paper's own 👍 / 👎.
        html = body(message, "html")
        assert html.count(">👍</a>") == html.count(">👎</a>") == len(papers)


def test_the_page_lists_the_email_s_papers_and_records_a_vote(site: Site) -> None:
    message = delivered(site)["ada"]
    path = rating_path(message)
    papers = ABS.findall(body(message, "plain"))
    page = site.http.get(path)
    assert page.status_code == 200
    assert "<script" not in page.text and page.headers["cache-control"] == "no-store"
    shown = re.findall(r'name="paper" value="([^"]+)"', page.text)
    assert shown == papers  # the email's papers, in its order
    assert page.text.count('aria-pressed="true"') == 0
    assert verdicts(site, "ada") == {}  # a GET (a link scanner) records nothing

    second = papers[1]
    answer = site.http.post(
        path, data={"csrf": csrf_of(page.text), "paper": second, "verdict": "like"}
    )
    assert answer.status_code == 303 and answer.headers["location"] == f"{path}#paper-2"
    (given,) = site.store.feedback.of(site.subscriber("ada").id)
    stored = site.store.papers.by_id([second])[second]
    assert (given.key, given.verdict, given.via, given.title) == (
        second,
        "like",
        "email",
        stored.title,
    )
    again = site.http.get(path)
    item = again.text.split('id="paper-2"', 1)[1].split("</li>", 1)[0]
    assert 'name="take_back" value="like" aria-pressed="true"' in item and "You like it" in item
    assert again.text.count('aria-pressed="true"') == 1

    # 👎 replaces it; pressing the lit 👎 takes it back, and the 👍 it replaced stands.
    assert vote(site, path, second, "dislike") == 303
    assert verdicts(site, "ada") == {second: "dislike"}
    assert vote(site, path, second, "dislike", field="take_back") == 303
    assert verdicts(site, "ada") == {second: "like"}
    assert vote(site, path, second, "like", field="take_back") == 303
    assert verdicts(site, "ada") == {}
    # The same vote twice: one verdict.
    assert vote(site, path, papers[0], "dislike") == 303
    assert vote(site, path, papers[0], "dislike") == 303
    assert verdicts(site, "ada") == {papers[0]: "dislike"}
    assert "👎 Not liked · 1" in site.http.get(site.link("manage", "ada")).text


def _body(path: str) -> tuple[str, str]:
    token = path.removeprefix("/rate/")
    head, _, rest = token.partition(".")
    return head, rest


def _other_digest(path: str, digest_hex: str) -> str:
    """The token with its body naming another digest (its time and signature kept)."""
    head, rest = _body(path)
    number = re.match(r"\d+", head)
    assert number
    packed = base64.urlsafe_b64encode(bytes.fromhex(digest_hex)).decode().rstrip("=")
    return f"/rate/{number.group()}h{packed}.{rest}"


def test_edited_and_foreign_links_are_refused_and_change_nothing(site: Site) -> None:
    messages = delivered(site)
    path, lab_path = rating_path(messages["ada"]), rating_path(messages["lab"])
    paper = ABS.findall(body(messages["ada"], "plain"))[0]
    head, rest = _body(path)
    lab_head, _ = _body(lab_path)
    lab_digest = ARCHIVED.search(body(messages["lab"], "plain"))
    assert lab_digest
    lab_hex = lab_digest.group(1).removeprefix("paperbell.")
    ada_id, lab_id = site.subscriber("ada").id, site.subscriber("lab").id
    edits = {
        "a flipped signature": path[:-1] + ("A" if not path.endswith("A") else "B"),
        "cut": path[: len(path) - 10],
        "lab's digest in ada's link": _other_digest(path, lab_hex),
        "ada's link naming lab": f"/rate/{lab_id!s}{head[len(str(ada_id)) :]}.{rest}",
        "lab's body, ada's signature": f"/rate/{lab_head}.{rest}",
        "a manage token": "/rate/" + site.link("manage", "ada").rsplit("/", 1)[1],
        "a feedback token": "/rate/"
        + (
            site.config.web.link_signer().feedback_token(  # type: ignore[union-attr]
                site.subscriber("ada"), paper, "like", now=site.clock()
            )
            or ""
        ),
    }
    csrf = csrf_of(site.http.get(path).text)
    for what, edited in edits.items():
        opened = site.http.get(edited)
        assert opened.status_code == 403 and "This link is not valid" in opened.text, what
        assert "lab.example" not in opened.text, what
        posted = site.http.post(edited, data={"csrf": csrf, "paper": paper, "verdict": "like"})
        assert posted.status_code == 403, what
    assert verdicts(site, "ada") == {} and verdicts(site, "lab") == {}
    # Each link opens its own email's page, and only that.
    assert site.http.get(lab_path).status_code == 200


def test_a_genuine_link_to_a_digest_not_sent_to_its_subscriber_gets_404(site: Site) -> None:
    messages = delivered(site)
    lab_digest = ARCHIVED.search(body(messages["lab"], "plain"))
    assert lab_digest
    signer = site.config.web.link_signer()
    assert signer is not None
    ada = site.subscriber("ada")
    paper = ABS.findall(body(messages["lab"], "plain"))[0]
    csrf = site.csrf(site.link("manage", "ada"))
    for digest_id in (lab_digest.group(1), "paperbell." + "0" * 32, "a-digest-never-sent"):
        url = signer.rating_url(ada, digest_id, now=site.clock())
        assert url is not None
        path = site.local(url)
        page = site.http.get(path)
        assert page.status_code == 404 and "No such digest" in page.text, digest_id
        answer = site.http.post(path, data={"csrf": csrf, "paper": paper, "verdict": "like"})
        assert answer.status_code == 404
    assert verdicts(site, "ada") == {}


@pytest.mark.parametrize(
    "form",
    [
        {"paper": "2401.99999", "verdict": "like"},  # a paper not in this email
        {"paper": "", "verdict": "like"},
        {"verdict": "like"},
        {"paper": "FIRST", "verdict": "meh"},
        {"paper": "FIRST"},
        {"paper": "FIRST\x00", "verdict": "like"},
        {"paper": "FIRST", "take_back": "maybe"},
        {"paper": "x" * 20_000, "verdict": "like"},  # past the form's size cap
    ],
)
def test_a_hostile_form_changes_nothing(site: Site, form: dict[str, str]) -> None:
    message = delivered(site)["ada"]
    path = rating_path(message)
    first = ABS.findall(body(message, "plain"))[0]
    page = site.http.get(path)
    data = {key: value.replace("FIRST", first) for key, value in form.items()}
    answer = site.http.post(path, data={"csrf": csrf_of(page.text), **data})
    assert answer.status_code in (400, 413)
    assert "Nothing was changed" in answer.text or "Too large" in answer.text
    assert verdicts(site, "ada") == {}


def test_a_post_without_the_page_s_token_or_from_another_site_changes_nothing(
    site: Site,
) -> None:
    message = delivered(site)["ada"]
    path = rating_path(message)
    first = ABS.findall(body(message, "plain"))[0]
    page = site.http.get(path)
    bare = site.http.post(path, data={"paper": first, "verdict": "like"})
    assert bare.status_code == 403
    cross = site.http.post(
        path,
        data={"csrf": csrf_of(page.text), "paper": first, "verdict": "like"},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert cross.status_code == 403
    assert verdicts(site, "ada") == {}


def test_an_expired_link_records_nothing_and_offers_a_fresh_one(site: Site) -> None:
    message = delivered(site)["ada"]
    path = rating_path(message)
    first = ABS.findall(body(message, "plain"))[0]
    site.clock.advance(days=729)
    assert site.http.get(path).status_code == 200  # as long as a paper's own 👍 / 👎
    site.clock.advance(days=2)
    expired = site.http.get(path)
    assert expired.status_code == 410 and "This link has expired" in expired.text
    csrf = csrf_of(expired.text)
    posted = site.http.post(path, data={"csrf": csrf, "paper": first, "verdict": "like"})
    assert posted.status_code == 410
    assert verdicts(site, "ada") == {}
    sent = site.http.post(path + "/renew", data={"csrf": csrf})
    assert sent.status_code == 200 and "A new link is on its way" in sent.text


def test_a_removed_subscribers_link_no_longer_works(site: Site) -> None:
    path = rating_path(delivered(site)["ada"])
    site.store.subscribers.delete("ada")
    page = site.http.get(path)
    assert page.status_code == 403 and "This link is not valid" in page.text


@pytest.mark.parametrize(
    "token",
    ["x" * 5000, "%00%00", "%E2%80%AE.%F0%9F%91%8D.x", "1hAAAA.Z0eygA.AAAA", "a.b.c", "..."],
)
def test_hostile_tokens_get_a_page_never_an_error(site: Site, token: str) -> None:
    csrf = site.csrf(site.link("manage", "lab"))
    for method, path in (("GET", ""), ("POST", ""), ("POST", "/renew")):
        answer = site.http.request(method, f"/rate/{token}{path}", data={"csrf": csrf})
        assert 400 <= answer.status_code < 500, (method, path, answer.status_code)
