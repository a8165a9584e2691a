"""Issue 41, part 1: a destination a subscriber gives on the manage page goes to a public web
service and nowhere else. Tried as an attacker would, on real parts: the real web app on
loopback (uvicorn), a listener that records every connection, the project's SMTP sink, and
Apprise's own plugins sending. The page refuses each way to the server's own network; a
destination that got in before the guard (or whose name resolves elsewhere by the time it
is sent) reaches no such address when a digest goes; what a refusing service answered never
reaches the subscriber; the operator's own destinations (config file, command line) may
still name internal hosts. And the address check itself, by property: every spelling of a
private address is refused, public ones pass."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from support.cli import invoke
from support.config import WEB_SECRET
from support.listener import Listener, listener
from support.pages import START, Site, open_site
from support.servers import http_serving, smtp_sink

from bot.channels.apprise_urls import destination, self_service_refusal
from bot.channels.guard import host_refusal, is_own_address, lookup, reachable
from bot.core.addresses import Reach, is_public, parse_reach
from bot.demo import bundled_papers
from bot.pipeline import DeliveryRequest, deliver, wire
from bot.pipeline.wiring import load_config
from bot.store import Store, utcnow

# Networks no destination given on the page may reach (IPv4), and some that anyone may.
PRIVATE_V4 = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
]
PRIVATE_V6 = ["::1/128", "::/128", "fe80::/10", "fc00::/7", "ff00::/8", "2001:db8::/32"]
PUBLIC_V4 = ["8.8.8.0/24", "1.1.1.0/24", "93.184.0.0/16", "151.101.0.0/16", "185.199.108.0/22"]


def addresses_in(networks: list[str]) -> st.SearchStrategy[Any]:
    nets = [ipaddress.ip_network(n) for n in networks]
    return st.sampled_from(nets).flatmap(
        lambda net: st.integers(0, net.num_addresses - 1).map(lambda i: net[i])
    )


def spellings(ip: ipaddress.IPv4Address, *, compatible: bool = True) -> list[str]:
    """The ways a URL's host may write one IPv4 address: dotted, one number (decimal, hex),
    octal and hex parts, the short forms, and the IPv6 forms that carry it."""
    n, octets = int(ip), ip.packed
    found = [
        str(ip),
        str(n),
        hex(n),
        ".".join(f"0{o:o}" for o in octets),
        ".".join(hex(o) for o in octets),
        f"{octets[0]}.{n & 0xFFFFFF}",
        f"{octets[0]}.{octets[1]}.{n & 0xFFFF}",
        f"::ffff:{ip}",
        f"::ffff:{n >> 16:x}:{n & 0xFFFF:x}",
        f"[::ffff:{ip}]",
        f"64:ff9b::{ip}",
        f"2002:{n >> 16:x}:{n & 0xFFFF:x}::1",
    ]
    return found + ([f"::{ip}"] if compatible else [])


@given(ip=addresses_in(PRIVATE_V4), spelling=st.integers(0, 12))
@example(ip=ipaddress.IPv4Address("127.0.0.1"), spelling=1)  # json://2130706433
@example(ip=ipaddress.IPv4Address("169.254.169.254"), spelling=0)  # cloud metadata
def test_every_spelling_of_a_private_address_is_refused(
    ip: ipaddress.IPv4Address, spelling: int
) -> None:
    host = spellings(ip)[spelling]
    assert host_refusal(host, Reach()) is not None, host
    assert all(not is_public(found) for found in lookup(host.strip("[]")) or [host])


@given(ip=addresses_in(PRIVATE_V6))
@example(ip=ipaddress.IPv6Address("::1"))
def test_private_ipv6_addresses_are_refused(ip: ipaddress.IPv6Address) -> None:
    assert host_refusal(f"[{ip}]", Reach()) is not None
    assert not is_public(ip) and not Reach().allows(str(ip))


@given(ip=addresses_in(PUBLIC_V4), spelling=st.integers(0, 11))
def test_public_addresses_pass_in_every_spelling(ip: ipaddress.IPv4Address, spelling: int) -> None:
    host = spellings(ip, compatible=False)[spelling]
    assert host_refusal(host, Reach()) is None, host
    assert all(is_public(found) for found in lookup(host.strip("[]")) or ())


def test_names_are_looked_up_and_the_operator_may_allow_hosts_and_networks() -> None:
    answers = {
        "hooks.example.org": ["93.184.215.14"],
        "inside.example.org": ["93.184.215.14", "10.0.0.5"],  # one private answer is enough
        "ntfy.lab.example": ["10.1.2.3"],
    }

    def resolve(name: str) -> list[str] | None:
        return answers.get(name)

    plain = Reach()
    assert host_refusal("hooks.example.org", plain, resolve=resolve) is None
    assert host_refusal("inside.example.org", plain, resolve=resolve) is not None
    assert host_refusal("nowhere.example.org", plain, resolve=resolve) is None  # checked at send
    for name in ("localhost", "metadata.google.internal", "printer.local", "x.localhost"):
        assert host_refusal(name, plain, resolve=resolve) is not None, name
    lab = parse_reach(["ntfy.lab.example", "10.9.0.0/16"])
    assert host_refusal("ntfy.lab.example", lab, resolve=resolve) is None
    assert host_refusal("10.9.8.7", lab) is None and host_refusal("10.8.0.1", lab) is not None
    assert lab.allows("::ffff:10.9.0.1") and not lab.allows("10.1.2.3")
    with pytest.raises(ValueError, match="no host name, address or network"):
        parse_reach(["http://x/"])


def outward_address() -> ipaddress.IPv4Address | None:
    """This machine's address toward the internet (its default route's source), found
    without a packet sent; None on a machine with no route out."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.123", 9))
        except OSError:
            return None
        found = ipaddress.IPv4Address(probe.getsockname()[0])
    return None if found.is_unspecified else found


def test_this_machines_own_addresses_are_found_and_no_other() -> None:
    own = [ipaddress.ip_address(a) for a in ("127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1")]
    assert all(is_own_address(address) for address in own)
    outward = outward_address()
    assert outward is None or is_own_address(outward)
    elsewhere = [ipaddress.ip_address(a) for a in ("8.8.8.8", "240.0.0.1", "2001:db8::77")]
    assert not any(is_own_address(address) for address in elsewhere)


def test_the_servers_own_public_address_is_refused_unless_the_operator_names_it() -> None:
    """A server with a public address on its interface (a rented VPS): that address is
    public, yet a connection to it from inside reaches every service listening on all
    interfaces, past the firewall. It is refused, on the page and at each send (`own` is
    the machine's own answer, here the VPS's), unless the operator allows it by itself."""
    vps = ipaddress.ip_address("93.184.215.14")

    def own(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return address in (vps, ipaddress.ip_address("::ffff:93.184.215.14"))

    def resolve(name: str) -> list[str] | None:
        return {"papers.lab.example": [str(vps)], "hooks.example.org": ["93.184.215.15"]}.get(name)

    plain, network = Reach(), parse_reach(["93.184.215.0/24"])
    for host in (str(vps), "papers.lab.example", "[::ffff:93.184.215.14]"):
        for reach in (plain, network):
            refusal = host_refusal(host, reach, resolve=resolve, own=own)
            assert refusal == f"{host} is this server's own address", (host, reach)
    assert not reachable(plain, vps, own=own) and not reachable(network, vps, own=own)
    assert host_refusal("hooks.example.org", plain, resolve=resolve, own=own) is None
    assert reachable(plain, ipaddress.ip_address("93.184.215.15"), own=own)
    alone = parse_reach([str(vps)])
    assert host_refusal(str(vps), alone, own=own) is None and reachable(alone, vps, own=own)
    named = parse_reach(["papers.lab.example"])
    assert host_refusal("papers.lab.example", named, resolve=resolve, own=own) is None


@pytest.mark.database
def test_a_network_the_operator_allows_leads_to_no_address_of_this_server(
    database_url: str,
) -> None:
    """The operator lets the page's destinations reach a network that holds the server
    (here its loopback network; on a site, the lab's network it runs in). The server's own
    address is still refused on the page, and a destination that got in is refused at
    each send: nothing reaches the server's services."""
    with (
        attacked_site(database_url, self_service_allow=["127.0.0.0/8"]) as site,
        listener("127.0.0.1") as server,
    ):
        path = site.link("manage", "ada")
        url = f"json://{server.netloc}/hook"
        refused = site.post(path + "/add-destination", {"url": url}, page=path)
        assert refused.status_code == 400 and "is this server&#39;s own address" in refused.text
        ada = site.subscriber("ada")
        site.store.targets.add_destination(
            ada.id, destination(url).channel, url, now=site.clock(), self_service=True
        )
        (report,) = [r for r in site.deliver() if r.channel.startswith("apprise:")]
        assert report.status == "failed", report
    assert server.seen() == []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mailto://127.0.0.1:25?to=x@example.org&from=a@example.org", "only web services"),
        ("irc://irc.example.org/#papers", "only web services"),
        ("vapid://ada@example.org/sub?keyfile=/etc/paperbell/key.pem", "only web services"),
        ("fcm://project/device?keyfile=/etc/passwd", "names a file on this server"),
        ("json://metadata.google.internal/computeMetadata/v1/", "not on the public internet"),
        ("ntfy://127.0.0.1", "not on the public internet"),  # a topic on ntfy.sh: meant a host
    ],
)
def test_kinds_that_are_no_web_service_and_local_files_are_refused(url: str, why: str) -> None:
    destination(url)  # Apprise reads each: the refusal is paperbell's
    refusal = self_service_refusal(url, Reach())
    assert refusal is not None and why in refusal
    assert self_service_refusal(url, Reach(on=False)) == (
        "this site takes no destinations given on this page"
    )


# -- on the real web app ---------------------------------------------------------------------


@contextmanager
def attacked_site(database_url: str, **apprise: Any) -> Iterator[Site]:
    """The pages as a site with sign-up on sets them up: no [apprise] allowance."""
    with open_site(database_url, apprise=apprise) as site:
        yield site


def doors(v4: Listener, v6: Listener, smtp_port: int) -> list[str]:
    """Every way to the listeners (and the SMTP sink) a stranger tried."""
    port = v4.port
    return [
        f"json://127.0.0.1:{port}/x?method=PUT&+X-Injected=1&+Authorization=Bearer%20x",
        f"json://2130706433:{port}/x",
        f"xml://localhost:{port}/x",
        f"jsons://{v6.netloc}/_bulk",
        "json://[::ffff:127.0.0.1]/x",
        f"ntfy://127.0.0.1:{port}/papers",
        "ntfy://127.0.0.1",
        f"mailto://127.0.0.1:{smtp_port}?to=x@example.org&from=a@example.org",
    ]


@pytest.mark.database
def test_the_manage_page_refuses_every_door_to_the_servers_own_network(
    database_url: str,
) -> None:
    with (
        attacked_site(database_url) as site,
        listener("127.0.0.1") as v4,
        listener("::1") as v6,
        smtp_sink() as (relay, smtp_port),
    ):
        path = site.link("manage", "ada")
        for url in doors(v4, v6, smtp_port):
            answer = site.post(path + "/add-destination", {"url": url}, page=path)
            assert answer.status_code == 400, url
            assert (
                "not on the public internet" in answer.text or "only web services" in answer.text
            ), url
        assert site.subscriber("ada").apprise == ()
        reports = site.deliver()
        assert {r.channel for r in reports if r.subscriber == "ada"} == {"email"}
    assert v4.seen() == [] and v6.seen() == [] and relay.messages == []


@pytest.mark.database
def test_a_destination_that_got_in_reaches_no_private_address_when_a_digest_goes(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Stored as given on the page before the guard was there (or a name that resolved
    elsewhere when the page checked it): each send is refused before any connection, said
    plainly to the subscriber, the address in the operator's log only."""
    with (
        attacked_site(database_url) as site,
        listener("127.0.0.1") as v4,
        listener("::1") as v6,
        smtp_sink() as (relay, smtp_port),
    ):
        ada = site.subscriber("ada")
        stored = [u for u in doors(v4, v6, smtp_port) if u != "ntfy://127.0.0.1"]
        for url in stored:
            assert site.store.targets.add_destination(
                ada.id, destination(url).channel, url, now=site.clock(), self_service=True
            )
        caplog.set_level(logging.WARNING, logger="bot.channels.apprise")
        reports = [r for r in site.deliver() if r.channel.startswith("apprise:")]
        assert len(reports) == len(stored)
        for report in reports:
            assert report.status == "failed", report
            assert report.error in (
                "its address is not on the public internet: refused",
                "mailto:// destinations cannot be given here: only web services (ntfy, "
                "Discord, Matrix, Telegram, a webhook ...)",
            ), report
        assert "refused a connection of a destination given on the page to 127.0.0.1" in (
            caplog.text
        )
        assert "::1" in caplog.text
    assert v4.seen() == [] and v6.seen() == [] and relay.messages == []


def redirecting(to: str) -> Any:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(307)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.mark.database
def test_an_allowed_host_does_not_lead_elsewhere_by_a_redirect(database_url: str) -> None:
    """The operator lets the page's destinations reach 127.0.0.1 (its lab's server); that
    server redirects to another loopback address: not followed, nothing reaches it."""
    with (
        attacked_site(database_url, self_service_allow=["127.0.0.1"]) as site,
        listener("127.0.0.2") as elsewhere,
        http_serving(redirecting(f"http://{elsewhere.netloc}/x")) as port,
    ):
        path = site.link("manage", "ada")
        url = f"json://127.0.0.1:{port}/hook"
        added = site.post(path + "/add-destination", {"url": url}, page=path)
        assert added.status_code == 303, added.text
        refused = site.post(
            path + "/add-destination", {"url": f"json://{elsewhere.netloc}/x"}, page=path
        )
        assert refused.status_code == 400 and "not on the public internet" in refused.text
        (report,) = [r for r in site.deliver() if r.channel.startswith("apprise:")]
        assert report.status != "sent"
    assert elsewhere.seen() == []


def refusing_ntfy(body: dict[str, Any]) -> Any:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer = json.dumps(body).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.mark.database
def test_a_refusing_services_reply_never_reaches_the_subscriber(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "INTERNAL-RESPONSE-DATA db_password=hunter2"
    body = {"code": 40001, "http": 400, "error": secret}
    caplog.set_level(logging.WARNING, logger="bot.channels.apprise")
    with (
        attacked_site(database_url, self_service_allow=["127.0.0.1"]) as site,
        http_serving(refusing_ntfy(body)) as port,
    ):
        path = site.link("manage", "ada")
        url = f"ntfy://127.0.0.1:{port}/papers"
        assert site.post(path + "/add-destination", {"url": url}, page=path).status_code == 303
        for _day in range(3):
            (report,) = [r for r in site.deliver() if r.channel.startswith("apprise:")]
            assert (report.error or "").startswith("the service refused the message (HTTP 400)")
            site.clock.advance(days=1)
        page = site.http.get(path)
        assert "3 digests in a row refused: the service refused the message (HTTP 400)" in (
            page.text
        )
        assert "hunter2" not in page.text and "INTERNAL" not in page.text
    assert secret in caplog.text  # the operator's log has what the service said


@pytest.mark.database
def test_the_operator_may_turn_the_pages_destinations_off(database_url: str) -> None:
    with attacked_site(database_url, self_service=False) as site, listener() as v4:
        ada = site.subscriber("ada")
        url = f"json://{v4.netloc}/hook"
        site.store.targets.add_destination(ada.id, destination(url).channel, url, now=site.clock())
        path = site.link("manage", "ada")
        page = site.http.get(path)
        assert "This site takes no destinations given on this page." in page.text
        assert 'action="' + path + '/add-destination"' not in page.text
        answer = site.post(path + "/add-destination", {"url": "ntfy://ntfy.sh/x"}, page=path)
        assert answer.status_code == 400 and "takes no destinations" in answer.text
        (report,) = [r for r in site.deliver() if r.channel.startswith("apprise:")]
        assert report.error == "destinations given on the page are off on this site"
    assert v4.seen() == []


CONFIG = """\
version = 1

[database]
url = "{database_url}"

[web]
public_url = "https://papers.lab.example"
secret_key_env = "PAPERBELL_SECRET_KEY"

[apprise]
pace_seconds = 0

[[subscribers]]
name = "lab"
rules = ['"large language models" reasoning', "robot cat:cs.RO"]
apprise = ["json://{netloc}/from-the-file"]
"""


@pytest.mark.database
def test_the_operators_destinations_may_name_internal_hosts(
    tmp_path: Path, database_url: str
) -> None:
    """The config file and the command line are the operator's: their loopback destinations
    are taken and sent to, unguarded."""
    with listener() as v4:
        config = tmp_path / "paperbell.toml"
        config.write_text(CONFIG.format(database_url=database_url, netloc=v4.netloc))
        env = {"PAPERBELL_SECRET_KEY": WEB_SECRET}
        url = f"json://{v4.netloc}/from-the-command-line"
        rules = ['"large language models" reasoning', "robot cat:cs.RO"]
        result = invoke("subscribe", "ada", "--apprise", url, *rules, config=config, env=env)
        assert result.exit_code == 0, result.output
        loaded = load_config(config, environ=env)
        with Store.open(database_url) as store:
            assert store.targets.given_on_page() == []
            store.papers.upsert(bundled_papers(), now=START)
            reports = asyncio.run(
                deliver(
                    wire(loaded, store),
                    DeliveryRequest(since=START.date()),
                    now=START,
                    clock=lambda: START,
                )
            )
        sent = [r for r in reports if r.channel.startswith("apprise:") and r.status == "sent"]
        assert {r.subscriber for r in sent} == {"lab", "ada"}, reports
        paths = {first.split(b" ")[1] for _, first in v4.seen()}
        assert {b"/from-the-file", b"/from-the-command-line"} <= paths


# -- the migration -----------------------------------------------------------------------------


@pytest.mark.database
def test_0015_counts_every_stored_destination_as_given_on_the_page(database_url: str) -> None:
    """From the oldest database through 0014 with a destination, 0015 keeps it and counts it
    as the page's (guarded: which ones the operator gave is not known); back to 0014, the
    destination is kept without the column."""
    from alembic import command
    from sqlalchemy import create_engine, inspect, text

    from bot.store import normalize_url
    from bot.store.schema import BASELINE, alembic_config, head

    def migrate(revision: str, *, down: bool = False) -> None:
        engine = create_engine(normalize_url(database_url))
        with engine.begin() as connection:
            (command.downgrade if down else command.upgrade)(alembic_config(connection), revision)
        engine.dispose()

    migrate(BASELINE)
    migrate("0014")
    url = "ntfy://ntfy.example/papers"
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO subscribers (name, email, origin, active, categories, max_papers, "
                "include, email_confirmed, email_format, abstracts, created_at) VALUES "
                "('ada', 'ada@lab.example', 'database', :yes, '[]', 20, '[\"new\"]', :yes, "
                "'html', 'short', :now)"
            ),
            {"yes": True, "now": utcnow()},
        )
        connection.execute(
            text(
                "INSERT INTO destinations (subscriber_id, channel, url, created_at) "
                "VALUES (1, :c, :u, :now)"
            ),
            {"c": destination(url).channel, "u": url, "now": utcnow()},
        )
    engine.dispose()
    migrate(head())
    with Store.open(database_url) as store:
        assert store.targets.given_on_page() == [url]
    migrate("0014", down=True)
    engine = create_engine(normalize_url(database_url))
    with engine.begin() as connection:
        columns = {c["name"] for c in inspect(connection).get_columns("destinations")}
        kept = connection.execute(text("SELECT url FROM destinations")).scalars().all()
    engine.dispose()
    assert "self_service" not in columns and kept == [url]
