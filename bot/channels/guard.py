"""The guard between a destination a subscriber gave and the server's own network: its host
looked up and checked before the destination is taken (`host_refusal`, for a plain answer
on the page), and, while one of its messages is sent, every connection the sending thread
opens checked against where it may go (`guarded`): the address the name resolved to at
that moment (DNS may answer otherwise than when the page checked it), each redirect's too.

`guarded` watches the interpreter's audit events (PEP 578, `sys.addaudithook`): a
"socket.connect", "socket.sendto" or "socket.sendmsg" of the thread that entered it to an
address the `Reach` does not allow fails with `Refused` (an OSError: the HTTP library gives
up on that address as on one that does not answer), and is remembered so the sender can
say why. Only numeric addresses pass (the resolver already turned every spelling of one
into its standard form); a name, or a local socket's path, is refused. The hook, once
added, stays for the process's life (Python keeps audit hooks); outside a guarded block it
returns at once. Which addresses may be reached is `bot.core.addresses`'s to say, but for
this machine's own (`reachable`): its public address passes as public, yet leads inside.

The same hook keeps the connections a send opens (`Connections`, with `guarded` or
`watched`), so that the sender can cut them off when its deadline passes: a service that
answers a byte at a time, or without end, stays within each read's timeout and would hold
the sending thread, and fill its memory, for as long as it likes.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bot.core.addresses import IPAddress, Reach, is_local_name, parse_ip

LOOKUP_DEADLINE = 3.0  # seconds a look-up may take on the page; then the host is not checked
_WATCHED = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})

Resolve = Callable[[str], list[str] | None]
Own = Callable[[IPAddress], bool]


class Refused(OSError):
    """A connection a guarded send may not open: its address is not one it may reach."""


def lookup(host: str, *, deadline: float = LOOKUP_DEADLINE) -> list[str] | None:
    """Every address `host` resolves to, in standard form (a numeric host in any spelling
    the system resolver reads: "2130706433", "0177.0.0.1", "127.1"); None when it does not
    resolve within `deadline` seconds."""
    found: list[list[str]] = []

    def ask() -> None:
        try:
            answers = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError, ValueError):
            return
        found.append(sorted({str(answer[4][0]) for answer in answers}))

    asking = threading.Thread(target=ask, name="paperbell-lookup", daemon=True)
    asking.start()
    asking.join(deadline)
    return found[0] if found else None


def is_own_address(address: IPAddress) -> bool:
    """Whether `address` is one of this machine's own (its public one among them): a socket
    binds to it. A connection there reaches every service listening on all interfaces from
    inside, past the firewall, as loopback does. Where the system lets a socket bind any
    address (`ip_nonlocal_bind`), the probe tells nothing, and no address is taken as own."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return _binds(address) and not _binds_anything(address.version)


def _binds(address: IPAddress) -> bool:
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


@cache
def _binds_anything(version: int) -> bool:
    """Whether a socket binds an address no machine has (240.0.0.1, reserved; 100::1,
    discard only): the system lets it bind any address."""
    return _binds(ipaddress.ip_address("240.0.0.1" if version == 4 else "100::1"))


def reachable(reach: Reach, address: IPAddress, *, own: Own = is_own_address) -> bool:
    """Whether a destination given on the page may connect to `address`: one `reach`
    allows, but none of this machine's own unless the operator allows it by itself."""
    if not reach.allows(address):
        return False
    return reach.names_alone(address) or not own(address)


def host_refusal(
    host: str, reach: Reach, *, resolve: Resolve = lookup, own: Own = is_own_address
) -> str | None:
    """Why a destination at `host` is refused (a local name, an address that is not
    public nor allowed, or this machine's own), or None. A name that does not resolve now
    passes: each send checks again (`guarded`)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if not name or name in reach.hosts:
        return None
    refusal = f"{host[:100]} is not on the public internet"
    if is_local_name(name):
        return refusal
    literal = parse_ip(name)
    found = [str(literal)] if literal is not None else resolve(name) or []
    addresses = [ip for ip in map(parse_ip, found) if ip is not None]
    if any(not reach.allows(address) for address in addresses):
        return refusal
    if any(not reachable(reach, address, own=own) for address in addresses):
        return f"{host[:100]} is this server's own address"
    return None


class Connections:
    """The connections one send opened, each kept as a copy of its socket, so that another
    thread can cut them off (`cut_off`) when the send's deadline passes; once cut off, a
    connection the send tries next is refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._copies: list[socket.socket] = []
        self._cut = False

    def opened(self, sock: Any) -> None:
        with self._lock:
            if self._cut:
                raise Refused("the send's deadline passed")
            with suppress(OSError, AttributeError, ValueError):
                self._copies.append(socket.fromfd(sock.fileno(), sock.family, sock.type))

    def cut_off(self) -> None:
        """End every connection the send opened: its reads end at once."""
        with self._lock:
            self._cut = True
            for copy in self._copies:
                with suppress(OSError):
                    copy.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Let go of the copies (the send is over)."""
        with self._lock:
            copies, self._copies = self._copies, []
        for copy in copies:
            copy.close()


@dataclass
class _Guard:
    """One watched send: what it may reach (None: anywhere), the addresses it was refused,
    and the connections it opened."""

    reach: Reach | None
    named: frozenset[str]  # the addresses of the hosts the operator allows by name
    connections: Connections
    refused: list[str] = field(default_factory=list)

    def check(self, address: Any) -> None:
        if address is None or self.reach is None:  # sendmsg: checked when it connected
            return
        host = address[0] if isinstance(address, tuple) and address else None
        ip = parse_ip(host) if isinstance(host, str) else None
        if ip is not None and (str(ip) in self.named or reachable(self.reach, ip)):
            return
        shown = str(host) if isinstance(host, str) else "a local socket"
        self.refused.append(shown[:100])
        raise Refused(f"{shown[:100]} is not an address a destination given on the page reaches")


_local = threading.local()
_installed: list[bool] = []
_install_lock = threading.Lock()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _WATCHED:
        guard: _Guard | None = getattr(_local, "guard", None)
        if guard is not None:
            guard.check(args[1] if len(args) > 1 else None)
            if event == "socket.connect" and args:
                guard.connections.opened(args[0])


def _install() -> None:
    with _install_lock:
        if not _installed:
            sys.addaudithook(_audit)
            _installed.append(True)


@contextmanager
def guarded(
    reach: Reach,
    *,
    hosts: Iterable[str] = (),
    resolve: Resolve = lookup,
    connections: Connections | None = None,
) -> Iterator[list[str]]:
    """While the block runs, every connection this thread opens must go to an address
    `reach` allows, or to one of `hosts` that the operator allows by name (looked up
    now), and is kept in `connections`. Yields the list of the addresses refused
    meanwhile."""
    named: set[str] = set()
    for host in hosts:
        name = host.strip().strip("[]").rstrip(".").lower()
        if name and name in reach.hosts:
            named.update(str(parse_ip(a)) for a in resolve(name) or () if parse_ip(a))
    with _watching(_Guard(reach, frozenset(named), connections or Connections())) as guard:
        yield guard.refused


@contextmanager
def watched(connections: Connections) -> Iterator[None]:
    """While the block runs, every connection this thread opens, wherever it goes, is kept
    in `connections`."""
    with _watching(_Guard(None, frozenset(), connections)):
        yield


@contextmanager
def _watching(guard: _Guard) -> Iterator[_Guard]:
    _install()
    outer = getattr(_local, "guard", None)
    _local.guard = guard
    try:
        yield guard
    finally:
        _local.guard = outer
        guard.connections.close()
