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
returns at once. Which addresses may be reached is `bot.core.addresses`'s to say.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bot.core.addresses import Reach, is_local_name, parse_ip

LOOKUP_DEADLINE = 3.0  # seconds a look-up may take on the page; then the host is not checked
_WATCHED = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})

Resolve = Callable[[str], list[str] | None]


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


def host_refusal(host: str, reach: Reach, *, resolve: Resolve = lookup) -> str | None:
    """Why a destination at `host` is refused (a local name, or an address that is not
    public nor allowed), or None. A name that does not resolve now passes: each send
    checks again (`guarded`)."""
    name = host.strip().strip("[]").rstrip(".").lower()
    if not name or reach.allows_host(name):
        return None
    refusal = f"{host[:100]} is not on the public internet"
    if is_local_name(name):
        return refusal
    literal = parse_ip(name)
    addresses = [str(literal)] if literal is not None else resolve(name) or []
    if any(not reach.allows(address) for address in addresses):
        return refusal
    return None


@dataclass
class _Guard:
    """One guarded send: what it may reach, and the addresses it was refused."""

    reach: Reach
    named: frozenset[str]  # the addresses of the hosts the operator allows by name
    refused: list[str] = field(default_factory=list)

    def check(self, address: Any) -> None:
        if address is None:  # sendmsg on a connected socket: checked when it connected
            return
        host = address[0] if isinstance(address, tuple) and address else None
        ip = parse_ip(host) if isinstance(host, str) else None
        if ip is not None and (str(ip) in self.named or self.reach.allows(ip)):
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


def _install() -> None:
    with _install_lock:
        if not _installed:
            sys.addaudithook(_audit)
            _installed.append(True)


@contextmanager
def guarded(
    reach: Reach, *, hosts: Iterable[str] = (), resolve: Resolve = lookup
) -> Iterator[list[str]]:
    """While the block runs, every connection this thread opens must go to an address
    `reach` allows, or to one of `hosts` that the operator allows by name (looked up
    now). Yields the list of the addresses refused meanwhile."""
    _install()
    named: set[str] = set()
    for host in hosts:
        name = host.strip().strip("[]").rstrip(".").lower()
        if name and name in reach.hosts:
            named.update(str(parse_ip(a)) for a in resolve(name) or () if parse_ip(a))
    outer = getattr(_local, "guard", None)
    guard = _local.guard = _Guard(reach, frozenset(named))
    try:
        yield guard.refused
    finally:
        _local.guard = outer
