"""Issue 41, part 3: the sign-up and rule-check limits count clients by the address a request
came from, and believe a proxy's X-Forwarded-For only from the proxies the operator names
([web] trusted_proxies): then the right-most address of the chain that is not one of them
counts. One client past its own limit is refused before it counts against everyone's, and
the overall limits are far above one client's. On the real web app (uvicorn on loopback,
as `paperbell serve` runs it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from support.pages import Site, open_site

from bot.core.errors import ConfigError
from bot.web.guards import Throttle
from bot.web.signup import (
    RULE_CHECKS_OVERALL,
    RULE_CHECKS_PER_CLIENT,
    SIGNUPS_OVERALL,
    SIGNUPS_PER_CLIENT,
)

pytestmark = pytest.mark.database


@pytest.fixture
def proxied(database_url: str) -> Iterator[Site]:
    """The pages behind a reverse proxy on this machine, named as trusted."""
    with open_site(database_url, web={"trusted_proxies": ["127.0.0.1", "::1"]}) as site:
        yield site


def rule_check(site: Site, forwarded: str | None) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return site.http.post("/rules/check", data={"rule": "robot"}, headers=headers)


def sign_up(site: Site, email: str, forwarded: str | None) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    csrf = site.csrf("/subscribe")
    return site.http.post(
        "/subscribe", data={"email": email, "rule": "robot", "csrf": csrf}, headers=headers
    )


def test_forged_forwarded_addresses_are_not_believed_from_loopback(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    """With no trusted proxy (the default), 40 rule checks with 40 forged X-Forwarded-For
    values are one client: the 31st meets a 429; so do forged sign-ups past five; the log
    says once why."""
    caplog.set_level(logging.WARNING, logger="bot.web.signup")
    answers = [rule_check(site, f"198.51.100.{n}").status_code for n in range(40)]
    assert answers[:RULE_CHECKS_PER_CLIENT] == [200] * RULE_CHECKS_PER_CLIENT
    assert set(answers[RULE_CHECKS_PER_CLIENT:]) == {429}
    signups = [sign_up(site, f"p{n}@lab.example", f"203.0.113.{n}").status_code for n in range(7)]
    assert signups == [200] * SIGNUPS_PER_CLIENT + [429] * 2
    assert caplog.text.count("[web] trusted_proxies names none") == 1


def test_behind_a_trusted_proxy_the_right_most_untrusted_address_counts(proxied: Site) -> None:
    """The proxy appends the address it saw; what a client wrote before it is not
    believed: an attacker forging 40 values is one client (203.0.113.7), and a visitor
    from elsewhere still gets through."""
    answers = [
        rule_check(proxied, f"10.0.0.{n}, 203.0.113.7, 127.0.0.1").status_code for n in range(40)
    ]
    assert answers.count(200) == RULE_CHECKS_PER_CLIENT and answers[-1] == 429
    assert rule_check(proxied, "198.51.100.9").status_code == 200
    for n in range(SIGNUPS_PER_CLIENT + 3):
        last = sign_up(proxied, f"p{n}@lab.example", f"192.0.2.{n}, 203.0.113.7")
    assert last.status_code == 429 and "Too many sign-ups" in last.text
    visitor = sign_up(proxied, "real@lab.example", "198.51.100.9")
    assert visitor.status_code == 200 and "Check your inbox" in visitor.text


def test_a_trusted_proxys_https_makes_the_cookie_secure_and_no_one_elses_does(
    site: Site, proxied: Site
) -> None:
    said = {"X-Forwarded-Proto": "https"}
    assert "secure" in proxied.http.get("/subscribe", headers=said).headers["set-cookie"].lower()
    assert "secure" not in site.http.get("/subscribe", headers=said).headers["set-cookie"].lower()


def test_one_client_cannot_use_up_everyones_limit() -> None:
    now = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
    throttle = Throttle(per_client=5, overall=12)
    for _ in range(50):  # refused past its own five: never counted against everyone
        throttle.allow("203.0.113.7", now)
    assert all(throttle.allow(f"198.51.100.{n}", now) for n in range(7))
    assert not throttle.allow("198.51.100.99", now)  # everyone's twelve
    assert throttle.allow("198.51.100.99", now + timedelta(hours=1, seconds=1))
    assert SIGNUPS_OVERALL >= 40 * SIGNUPS_PER_CLIENT
    assert RULE_CHECKS_OVERALL >= 100 * RULE_CHECKS_PER_CLIENT


def test_an_ipv6_client_is_counted_by_its_slash_64() -> None:
    """A machine may use any address of its /64: they are one client."""
    from starlette.requests import Request

    from bot.web.guards import client_of

    def client(host: str) -> str:
        return client_of(Request({"type": "http", "client": (host, 1), "headers": []}))

    assert client("2001:db8:1:2::1") == client("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client("2001:db8:1:3::1") != client("2001:db8:1:2::1")
    assert client("::ffff:203.0.113.7") == client("203.0.113.7") == "203.0.113.7"


@pytest.mark.parametrize(
    ("proxies", "problem"),
    [
        (["*"], "'*' is not an address or a network"),
        (["proxy.lab.example"], "name each proxy by the address it connects from"),
    ],
)
def test_trusted_proxies_are_addresses_or_networks(proxies: list[str], problem: str) -> None:
    from support.config import web_config

    with pytest.raises(ConfigError, match="trusted_proxies") as info:
        web_config("sqlite:///unused.sqlite", 25, web={"trusted_proxies": proxies})
    assert problem in str(info.value)
    config = web_config(
        "sqlite:///unused.sqlite", 25, web={"trusted_proxies": ["127.0.0.1", "10.0.0.0/8"]}
    )
    assert config.web.trusted_proxies == ["127.0.0.1", "10.0.0.0/8"]
