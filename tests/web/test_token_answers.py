"""Issue 41, part 4: a forged feed, archive or 👍 / 👎 token answers the same whether the
subscriber id it names exists, never existed, or was deleted, so the answers do not tell how
many subscribers there are nor who left; and an email's 👍 / 👎 link of the kind that shared
one signature answers as a forged one. On the real web app (uvicorn on loopback)."""

from __future__ import annotations

import base64
import re

import httpx
import pytest
from support.config import WEB_SECRET
from support.old_links import shared_vote_token
from support.pages import Site, emailed_papers, mail_to

pytestmark = pytest.mark.database


def answer(response: httpx.Response) -> tuple[int, str]:
    """What a visitor learns: the status and the page, without its form token."""
    return response.status_code, re.sub(r'value="[^"]+"', 'value=""', response.text)


def forged_ids(site: Site) -> dict[str, int]:
    """An id that exists (ada), one deleted (bob), and one that never did."""
    site.store.subscribers.add("bob", email="bob@lab.example", rules=["robot"], now=site.clock())
    bob = site.subscriber("bob").id
    site.store.subscribers.delete("bob")
    return {"existing": site.subscriber("ada").id, "deleted": bob, "missing": 99999}


def test_forged_feed_and_archive_tokens_answer_alike_for_every_id(site: Site) -> None:
    signer = site.config.web.link_signer()
    real = signer.standing_token("feed", site.subscriber("ada"))
    signature = real.partition(".")[2]
    wrong = ("A" if signature[0] != "A" else "B") + signature[1:]
    ids = forged_ids(site)
    for path in ("/feed/{token}.atom", "/archive/{token}"):
        answers = {
            who: answer(site.http.get(path.format(token=f"{number}.{wrong}")))
            for who, number in ids.items()
        }
        first = answers["missing"]
        assert first[0] == 403, path
        assert all(found == first for found in answers.values()), (path, answers)
    assert site.http.get(f"/feed/{real}.atom").status_code == 200  # the real one opens


def test_forged_feedback_tokens_answer_alike_for_every_id(site: Site) -> None:
    signer = site.config.web.link_signer()
    ada = site.subscriber("ada")
    real = signer.feedback_token(ada, "2411.18179", "like", now=site.clock())
    assert real is not None
    stamp, _, signature = real.partition(".")[2].partition(".")
    wrong = ("A" if signature[0] != "A" else "B") + signature[1:]

    def token(number: int) -> str:
        body = base64.urlsafe_b64encode(f"{number}\nl\n2411.18179".encode()).decode()
        return f"{body.rstrip('=')}.{stamp}.{wrong}"

    ids = forged_ids(site)
    gets = {who: answer(site.http.get(f"/feedback/{token(n)}")) for who, n in ids.items()}
    csrf = site.csrf(site.link("manage", "lab"))
    posts = {
        who: answer(site.http.post(f"/feedback/{token(n)}", data={"csrf": csrf}))
        for who, n in ids.items()
    }
    for found in (gets, posts):
        first = found["missing"]
        assert first[0] == 403 and all(other == first for other in found.values()), found
    assert site.store.feedback.of(ada.id) == []


def test_links_that_shared_an_emails_signature_answer_as_forged_ones(site: Site) -> None:
    """An email's 👍 / 👎 links once shared one signature, their paper and verdict unsigned
    (support.old_links). Such a link, made for a paper ada was sent and still in date, is
    refused with the very answer a token with a wrong signature gets, and records nothing."""
    assert {r.subscriber: r.status for r in site.deliver()}["ada"] == "sent"
    (message,) = mail_to(site, "ada@lab.example")
    paper = sorted(emailed_papers(message))[0]
    signer = site.config.web.link_signer()
    ada, now = site.subscriber("ada"), site.clock()
    real = signer.feedback_token(ada, paper, "like", now=now)
    assert real is not None
    forged = real[:-1] + ("A" if real[-1] != "A" else "B")
    old = {
        verdict: shared_vote_token(WEB_SECRET, ada, paper, verdict, now=now)
        for verdict in ("like", "dislike")
    }
    csrf = site.csrf(site.link("manage", "ada"))
    for method in ("GET", "POST"):
        expected = answer(site.http.request(method, f"/feedback/{forged}", data={"csrf": csrf}))
        assert expected[0] == 403 and "This link is not valid" in expected[1]
        for verdict, token in old.items():
            found = answer(site.http.request(method, f"/feedback/{token}", data={"csrf": csrf}))
            assert found == expected, (method, verdict)
    assert site.store.feedback.of(ada.id) == []
    assert site.http.get(f"/feedback/{real}").status_code == 200  # the link signed alone opens
