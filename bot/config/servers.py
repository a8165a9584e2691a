"""`[[email.servers]]`: the SMTP relays a site sends through when it has more than one, each
with its own connection, credentials (by environment variable), limits and weight.

A single relay stays the simple case: `[email] host` (and port, security, username,
password_env, max_per_*). With a servers list, those keys move into each server and [email]
keeps the rest (the sender, the list id, bounce_address, timeout): setting them in both
places is a config error naming the key. Must not read the environment (the passwords are
filled by bot.config.environment).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from bot.config.fields import EnvName, Section

MAX_SERVERS = 50
# The [email] keys that say how to reach one relay: with [[email.servers]], each server's.
RELAY_KEYS = (
    "host",
    "port",
    "security",
    "username",
    "password_env",
    "max_per_second",
    "max_per_hour",
    "max_per_day",
)
PORTS = {"starttls": 587, "tls": 465, "none": 25}


def check_host(value: str) -> str:
    """A host name or address as written: printable, no spaces, at most 253 characters."""
    if not value or len(value) > 253 or not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError("a host name or address (no spaces, at most 253 characters)")
    return value


class EmailServerConfig(Section):
    """One `[[email.servers]]` entry: an SMTP relay, its credentials, limits and weight (its
    share of the messages: a server of weight 3 takes three for every one of weight 1)."""

    host: str
    port: int | None = Field(None, ge=1, le=65535)
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = Field(None, min_length=1, max_length=320)
    password_env: EnvName | None = None
    max_per_second: int | None = Field(None, ge=1, le=100_000)
    max_per_hour: int | None = Field(None, ge=1, le=10_000_000)
    max_per_day: int | None = Field(None, ge=1, le=100_000_000)
    weight: int = Field(1, ge=1, le=1000)
    password: str | None = Field(None, exclude=True)  # filled from the environment only

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        return check_host(value)

    @property
    def effective_port(self) -> int:
        return self.port or PORTS[self.security]

    @property
    def relay(self) -> str:
        """The relay as its limits are kept: "host:port"."""
        return f"{self.host.lower()}:{self.effective_port}"


def servers_problem(servers: list[EmailServerConfig], set_here: set[str]) -> str | None:
    """What is wrong with [email]'s servers list beside [email]'s own keys (None: nothing)."""
    if not servers:
        return None
    both = [key for key in RELAY_KEYS if key in set_here]
    if both:
        keys = ", ".join(both)
        return (
            f"{keys} in [email] beside [[email.servers]]: with a servers list each server "
            f"has its own (move {keys} into each server, or drop the list)"
        )
    seen: dict[str, int] = {}
    for index, server in enumerate(servers):
        if server.relay in seen:
            return (
                f"servers[{index}] is servers[{seen[server.relay]}] again ({server.relay}): "
                "list each relay once"
            )
        seen[server.relay] = index
    return None
