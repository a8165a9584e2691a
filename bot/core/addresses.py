"""Which network addresses a destination a subscriber gave may reach: public ones, and the
hosts and networks the operator names (`Reach`). Guards the server's own network from the
URLs strangers type on the manage page (server-side request forgery).

An address is public when the standard library says it is globally reachable
(`ipaddress`'s `is_global`) and is no multicast, reserved or IETF protocol address; an
IPv6 form that carries an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, NAT64
`64:ff9b::/96`, 6to4 `2002::/16`) is public when that IPv4 address is. The IPv4-compatible
form (`::a.b.c.d`), Teredo and local NAT64 (`64:ff9b:1::/48`) never are. Every other
spelling of an address (decimal `2130706433`, octal `0177.0.0.1`, `127.1`) is the
resolver's to turn into one of these first (`bot.channels.guard`).

Pure: no I/O; names are never resolved here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
# IETF protocol assignments: `is_global` of Python before 3.11.10 counts some of them
# (192.0.0.8, the dummy address) as global; no web service is there.
_PROTOCOL_ASSIGNMENTS = ipaddress.IPv4Network("192.0.0.0/24")
# Names that never leave the machine or its site (RFC 6761, RFC 6762 appendix G, RFC 8375,
# the cloud metadata names): refused before any look-up.
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
LOCAL_SUFFIXES = (
    ".localhost",
    ".local",
    ".internal",
    ".intranet",
    ".home.arpa",
    ".home",
    ".lan",
    ".corp",
    ".private",
    ".localdomain",
)
MAX_REACH = 100  # entries of [apprise] self_service_allow


def parse_ip(text: str) -> IPAddress | None:
    """The address `text` writes in its standard form ("127.0.0.1", "::1", "[::1]", with a
    zone "fe80::1%eth0"), or None."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None


def is_public(address: IPAddress | str) -> bool:
    """Whether an address is one anyone on the internet reaches (see the module's
    docstring); a text that is no address is not."""
    ip = parse_ip(address) if isinstance(address, str) else address
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64 or ip in _COMPATIBLE or ip.teredo is not None:
            return False
        inside = _embedded_ipv4(ip)
        if inside is not None:
            return is_public(inside)
    if ip in _PROTOCOL_ASSIGNMENTS:
        return False
    return ip.is_global and not ip.is_multicast and not ip.is_reserved


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, NAT64, 6to4)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_local_name(host: str) -> bool:
    """Whether a host name is one that names this machine or its site (localhost,
    *.internal, *.local ...): no public service is called that."""
    name = host.strip().rstrip(".").lower()
    return name in LOCAL_NAMES or name.endswith(LOCAL_SUFFIXES)


@dataclass(frozen=True)
class Reach:
    """Where destinations given on the manage page may go: public addresses, and the host
    names and networks the operator allows ([apprise] self_service_allow). `on` False: no
    such destination is taken or sent to ([apprise] self_service)."""

    on: bool = True
    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    def allows(self, address: IPAddress | str) -> bool:
        """Whether a connection may go to this address."""
        ip = parse_ip(address) if isinstance(address, str) else address
        if ip is None:
            return False
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if mapped is not None and any(mapped in network for network in self.networks):
            return True
        return any(ip in network for network in self.networks) or is_public(ip)

    def names_alone(self, address: IPAddress) -> bool:
        """Whether the operator allows this address by itself (10.1.2.3, not in 10.1.2.0/24)."""
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        return any(
            network.num_addresses == 1 and (address in network or mapped in network)
            for network in self.networks
        )

    def allows_host(self, host: str) -> bool:
        """Whether the operator named this host (by name, or an address in a network)."""
        name = host.strip().strip("[]").rstrip(".").lower()
        if name in self.hosts:
            return True
        ip = parse_ip(name)
        return ip is not None and any(ip in network for network in self.networks)


def parse_reach(entries: Iterable[str], *, on: bool = True) -> Reach:
    """The `Reach` of [apprise] self_service_allow: host names, addresses and networks
    ("ntfy.lab.example", "10.1.2.3", "10.1.2.0/24", "fd00::/8"). Raises ValueError naming
    the first entry that is none of these."""
    hosts: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in entries:
        text = entry.strip().lower().rstrip(".")
        try:
            networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if not _is_host_name(text):
            raise ValueError(f"{entry[:100]!r} is no host name, address or network (10.1.2.0/24)")
        hosts.add(text)
    return Reach(on=on, hosts=frozenset(hosts), networks=tuple(networks))


def _is_host_name(text: str) -> bool:
    labels = text.split(".")
    return (
        0 < len(text) <= 253
        and text.isascii()
        and all(
            0 < len(label) <= 63
            and label.replace("-", "").replace("_", "").isalnum()
            and not label.startswith("-")
            for label in labels
        )
        and not labels[-1].isdigit()  # "10.1.2" would be an address's odd spelling
    )
