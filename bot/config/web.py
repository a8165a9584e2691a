"""`[web]`: the web app the daemon serves, and what its pages need: the public address the
signed links point to, their key and ages, sign-up, and the proxies whose word on the
client's address is taken (`trusted_proxies`).

Must not read the environment (the secret key is filled by bot.config.environment).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from pydantic import Field, field_validator

from bot.config.fields import EnvName, Section
from bot.core.links import LinkSigner, check_public_url, max_ages

DOMAIN_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")
MAX_PROXIES = 50


class WebConfig(Section):
    """`[web]`: the web app the daemon serves (health, metrics, Slack commands, and the
    pages reached from every email: one-click unsubscribe, manage, confirm, sign-up)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8025, ge=0, le=65535)
    # Where people reach the web app (a reverse proxy in front of host:port): a host's
    # root, no path, as the pages' forms post to /manage/... on it. With secret_key_env,
    # every email links to its manage and one-click unsubscribe pages.
    public_url: str | None = None
    secret_key_env: EnvName | None = None
    manage_link_days: float = Field(60, gt=0, le=3650)
    unsubscribe_link_days: float = Field(365, gt=0, le=3650)
    confirm_link_days: float = Field(7, gt=0, le=365)
    # The 👍 / 👎 links beside each paper of an email: people click them in old digests.
    feedback_link_days: float = Field(730, gt=0, le=3650)
    # A public sign-up page (/subscribe): anyone may ask for digests by email, after
    # confirming the address; `signup_domains` limits it to addresses at those domains.
    signup: bool = False
    signup_domains: list[str] = Field(default_factory=list)
    # The reverse proxies (addresses, networks) whose X-Forwarded-For and X-Forwarded-Proto
    # are believed: the client is the right-most address in the chain that is none of
    # them. None: every request's client is the address it came from.
    trusted_proxies: list[str] = Field(default_factory=list, max_length=MAX_PROXIES)
    secret_key: str | None = Field(None, exclude=True)  # filled from the environment only

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        return check_public_url(value) if value else None

    @field_validator("signup_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        domains = [d.strip().lower().lstrip("@") for d in value]
        for domain in domains:
            if not DOMAIN_RE.fullmatch(domain):
                raise ValueError(f"{domain!r} is not a domain name")
        return domains

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        proxies = []
        for entry in value:
            try:
                network = ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry[:100]!r} is not an address or a network (127.0.0.1, 10.0.0.0/8, "
                    "::1): name each proxy by the address it connects from"
                ) from None
            proxies.append(str(network.network_address if network.num_addresses == 1 else network))
        return proxies

    def link_signer(self) -> LinkSigner | None:
        """The signer of the links in emails, when the site is set up for them."""
        if not (self.public_url and self.secret_key):
            return None
        ages = max_ages(
            manage_days=self.manage_link_days,
            unsubscribe_days=self.unsubscribe_link_days,
            confirm_days=self.confirm_link_days,
            feedback_days=self.feedback_link_days,
        )
        return LinkSigner(self.secret_key, self.public_url, max_age=ages)


def web_link_problems(web: Any) -> list[str]:
    """What the raw [web] table's keys need of each other (the links need the address they
    point to; sign-up mails a link). Read from the raw table, so they are reported beside
    its other problems, not after those are fixed."""
    if not isinstance(web, dict):
        return []
    has = {key: isinstance(web.get(key), str) and bool(web[key].strip()) for key in web}
    problems = []
    if has.get("secret_key_env") and not has.get("public_url"):
        problems.append("web.secret_key_env: needs public_url, the address the links point to")
    if web.get("signup") is True and not has.get("secret_key_env"):
        problems.append(
            "web.signup: needs public_url and secret_key_env (it mails a link to confirm)"
        )
    return problems
