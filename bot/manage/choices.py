"""The site's own choices that the pages and the Manager follow, read once from the config
where the parts are wired (`SiteChoices.of`): the Manager never holds the whole config.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import Config


@dataclass(frozen=True, slots=True)
class SiteChoices:
    """The site's own choices that the pages follow, read once from the config: the rules'
    limit, who may sign up, whose name the pages carry, whether readers add destinations."""

    max_rules: int
    signup: bool = False
    signup_domains: tuple[str, ...] = ()
    trusted_proxies: bool = False  # [web] names a proxy whose word on the client is taken
    name: str = "paperbell"  # the digests' sender's name
    contact: str | None = None  # the digests' sender's address: whom a reader may write to
    destinations_open: bool = True  # [apprise] self_service

    @classmethod
    def of(cls, config: Config) -> SiteChoices:
        email, web = config.email, config.web
        return cls(
            max_rules=config.digest.max_rules,
            signup=web.signup,
            signup_domains=tuple(web.signup_domains),
            trusted_proxies=bool(web.trusted_proxies),
            name=email.from_name if email else "paperbell",
            contact=email.from_address if email else None,
            destinations_open=config.apprise.self_service,
        )
