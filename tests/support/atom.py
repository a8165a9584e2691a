"""Atom feeds checked as a feed reader and a validator would: parsed back with feedparser,
and validated against RFC 4287's RELAX NG schema (tests/fixtures/atom/, with lxml) and the
schema's three Schematron rules (which RELAX NG validators skip)."""

from __future__ import annotations

import functools
from typing import Any

import feedparser
from lxml import etree

from support.paths import FIXTURES

ATOM = "http://www.w3.org/2005/Atom"
SCHEMATRON = "http://www.ascc.net/xml/schematron"
SCHEMA = FIXTURES / "atom" / "rfc4287.rng"


@functools.cache
def _schema() -> tuple[etree.RelaxNG, list[tuple[str, str, str]]]:
    document = etree.parse(str(SCHEMA))
    rules = [
        (rule.get("context"), test.get("test"), (test.text or "").strip())
        for rule in document.iter(f"{{{SCHEMATRON}}}rule")
        for test in rule.iter(f"{{{SCHEMATRON}}}assert")
    ]
    assert len(rules) == 3, rules  # the feed's author, the entry's link and author
    return etree.RelaxNG(document), rules


def atom_problems(body: bytes) -> list[str]:
    """What makes `body` invalid Atom (empty: valid)."""
    schema, rules = _schema()
    document = etree.fromstring(body)
    problems = [] if schema.validate(document) else [str(e) for e in schema.error_log]
    namespaces = {"atom": ATOM}
    for context, test, message in rules:
        for node in document.xpath(f"//{context}|self::{context}", namespaces=namespaces):
            if not node.xpath(f"boolean({test})", namespaces=namespaces):
                problems.append(f"{node.tag}: {message}")
    return problems


def parsed_feed(body: bytes) -> Any:
    """The feed as feedparser reads it, checked valid first."""
    assert atom_problems(body) == []
    feed = feedparser.parse(body)
    assert not feed.bozo, feed.get("bozo_exception")
    assert feed.version == "atom10"
    return feed
