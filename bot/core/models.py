"""The data paperbell passes between its stages. Data only: no I/O, no database session.

`Paper` is what every source produces and every later stage reads. `Subscriber` is a
person (by email, Slack direct message) or a Slack channel, with rules. `Hit`, `DigestItem`,
`DigestGroup` and `Digest` carry a subscriber's matches from the digest builder to the
renderers and channels.
The database tables live in `bot.store`; they convert to and from these classes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal, NamedTuple

from bot.core.schedule import Schedule

EmailFormat = Literal["html", "text"]
AbstractLength = Literal["short", "full"]
# A digest too long for one email: in numbered parts, or as one email all the same.
LongEmails = Literal["parts", "one"]
EMAIL_FORMATS: tuple[str, ...] = ("html", "text")
ABSTRACT_LENGTHS: tuple[str, ...] = ("short", "full")

AnnounceType = Literal["new", "cross", "replace", "replace-cross"]
ANNOUNCE_TYPES: tuple[str, ...] = ("new", "cross", "replace", "replace-cross")

# What a subscriber may ask for in `include`; "replace" also admits "replace-cross".
INCLUDE_CHOICES: tuple[str, ...] = ("new", "cross", "replace")
DEFAULT_INCLUDE: frozenset[str] = frozenset({"new", "cross"})

# New-style ids (0704.0001 ... 2411.17700, 5 digits since 2015) and old-style
# archive/YYMMNNN ids (quant-ph/0201082, math.GT/0309136), each with an optional version.
# Linear on any text: an old-style archive name starts only where a run of letters starts
# (the lookbehind), so a long run of letters is scanned once, not once per letter.
# Digits are ASCII's ([0-9], not `\d`): an id in full-width or Arabic-Indic digits is none,
# or it would be stored under a key no ASCII id equals. The pattern, not a flag, says so:
# other patterns are built from it.
ARXIV_ID_RE = re.compile(
    r"(?P<id>[0-9]{4}\.[0-9]{4,5}|(?<![a-z\-])[a-z][a-z\-]{0,15}(?:\.[A-Z]{2})?/[0-9]{7})"
    r"(?:v(?P<version>[0-9]+))?"
)
# The longest text an arXiv id is looked for in (a guid, a link): longer is none.
MAX_ID_TEXT = 2048
# The highest version (and count) a database integer holds.
MAX_VERSION = 2**31 - 1


# The `id` of a paper that has no arXiv id: "doi:10.1101/2024.05.01.592030" (the DOI in
# lower case: DOIs are case-insensitive), else "url:" and its link.
NON_ARXIV_PREFIXES: tuple[str, ...] = ("doi:", "url:")
MAX_ID_LENGTH = 255
DOI_RE = re.compile(r"\b(10\.[0-9]{4,9}/[^\s\"<>]+)")  # ASCII digits, as ARXIV_ID_RE


def normalize_doi(text: str) -> str | None:
    """The DOI in `text` (`doi:10.1/x`, `https://doi.org/10.1/X`, `10.1/x`), lower case."""
    match = DOI_RE.search(text.strip())
    if match is None:
        return None
    return match.group(1).rstrip(".,;)").lower()


def doi_url(doi: str) -> str:
    return f"https://doi.org/{doi}"


def is_arxiv_id(key: str) -> bool:
    """Whether a stored paper's key is an arXiv id (not a "doi:" or "url:" key)."""
    return not key.startswith(NON_ARXIV_PREFIXES)


def paper_id(*, arxiv: str | None, dois: Sequence[str] = (), link: str | None = None) -> str:
    """The key a paper is stored and delivered under: its arXiv id; else "doi:" and its first
    DOI; else "url:" and its link (a digest of it if very long). Empty if it has none."""
    if arxiv:
        return arxiv
    for doi in dois:
        if normalized := normalize_doi(doi):
            key = f"doi:{normalized}"
            if len(key) <= MAX_ID_LENGTH:
                return key
    if link:
        key = f"url:{link.strip()}"
        if len(key) > MAX_ID_LENGTH:
            key = "url:sha256:" + hashlib.sha256(link.strip().encode()).hexdigest()
        return key
    return ""


def split_arxiv_id(text: str) -> tuple[str, int | None]:
    """Split `2411.17700v2` (or `oai:arXiv.org:2411.17700v2`, a URL) into id and version."""
    match = ARXIV_ID_RE.search(text) if len(text) <= MAX_ID_TEXT else None
    if match is None:
        raise ValueError(f"no arXiv identifier in {text[:80]!r}")
    version = match.group("version")
    if version and (len(version) > 10 or int(version) > MAX_VERSION):
        raise ArxivVersionError(
            f"{match.group('id')}: version {version[:12]}{'…' if len(version) > 12 else ''} "
            f"is out of range (1..{MAX_VERSION})"
        )
    return match.group("id"), int(version) if version else None


class ArxivVersionError(ValueError):
    """An arXiv id whose version no database integer holds (`2411.17700v99999999999`)."""


@dataclass(frozen=True, slots=True)
class Paper:
    """One paper as announced: the latest version paperbell has seen."""

    id: str  # version-less arXiv id: "2411.17700" or "quant-ph/0201082"
    version: int
    title: str  # plain text as published (TeX and all); never HTML
    abstract: str
    authors: tuple[str, ...]
    categories: tuple[str, ...]  # primary category first
    announce_type: str = "new"
    announced: date | None = None  # the announcement day the feed belongs to
    dois: tuple[str, ...] = ()
    journal_ref: str | None = None
    license: str | None = None
    source: str = ""  # the configured source name that delivered it
    # When and how paperbell first saw this paper (the store fills these): a v2 announced
    # before a subscriber's digest ran does not hide the paper's first announcement.
    first_announced: date | None = None
    first_type: str | None = None
    # Every source that brought it: configured names and kinds, lower case ("hf-daily",
    # "huggingface"), for `src:` rules. `source` above is the first of them.
    sources: tuple[str, ...] = ()
    # A paper that is not on arXiv (a journal or bioRxiv feed): its `id` is "doi:<doi>" or
    # "url:<link>", and `link` is its landing page. An arXiv paper may have one too.
    link: str | None = None
    # Hugging Face Daily Papers, when the paper is there (None / empty: not there): upvotes,
    # its rank among its day's papers by upvotes (1 = most), comments, the AI keywords and
    # summary, the code repository and its stars, the submitting organisation.
    upvotes: int | None = None
    hf_rank: int | None = None
    hf_day: date | None = None
    comments: int | None = None
    keywords: tuple[str, ...] = ()
    ai_summary: str | None = None
    github: str | None = None
    github_stars: int | None = None
    organization: str | None = None

    @property
    def primary_category(self) -> str | None:
        return self.categories[0] if self.categories else None

    @property
    def versioned_id(self) -> str:
        return f"{self.id}v{self.version}"

    @property
    def on_arxiv(self) -> bool:
        """Whether `id` is an arXiv id (not a "doi:" or "url:" key)."""
        return is_arxiv_id(self.id)

    @property
    def abs_url(self) -> str:
        """The paper's page: arXiv's abstract page, else its link, else its DOI's."""
        if self.on_arxiv:
            return f"https://arxiv.org/abs/{self.id}"
        if self.link:
            return self.link
        return doi_url(self.dois[0]) if self.dois else ""

    @property
    def pdf_url(self) -> str | None:
        return f"https://arxiv.org/pdf/{self.versioned_id}" if self.on_arxiv else None

    @property
    def html_url(self) -> str | None:
        return f"https://arxiv.org/html/{self.versioned_id}" if self.on_arxiv else None

    @property
    def label(self) -> str:
        """How the paper is named for people: `arXiv:2411.17700v2`, `doi:10.1101/…`."""
        if self.on_arxiv:
            return f"arXiv:{self.versioned_id}"
        return self.id if self.id.startswith("doi:") else "link"

    @property
    def hf_url(self) -> str:
        return f"https://huggingface.co/papers/{self.id}"

    @property
    def is_update(self) -> bool:
        return self.announce_type in ("replace", "replace-cross")

    @property
    def is_cross(self) -> bool:
        return self.announce_type in ("cross", "replace-cross")


@dataclass(frozen=True, slots=True)
class Subscriber:
    """Someone who receives digests, with the rules that pick their papers."""

    name: str
    email: str | None
    rules: tuple[str, ...]
    categories: tuple[str, ...] = ()  # empty: any category
    max_papers: int = 50
    include: frozenset[str] = DEFAULT_INCLUDE
    origin: Literal["config", "database"] = "config"
    active: bool = True
    id: int | None = None  # the database id, once stored
    schedule: Schedule = field(default_factory=Schedule)
    notify_empty: bool = False  # on a digest day with nothing to send, say why
    created: datetime | None = None  # when it was stored: no digest is due before
    last_slot: str | None = None  # the last schedule slot the daemon handled
    # Slack: a channel ("#robot-learning" or an id), or a user (a direct message), reached
    # with the bot token; or a channel's incoming webhook, named by its environment variable.
    slack_channel: str | None = None
    slack_user: str | None = None
    slack_webhook: str | None = None
    # Apprise (bot.channels.apprise): URLs of chat services and push servers (a database
    # subscriber's, given on the manage page, may hold a secret: never shown unmasked, so
    # left out of repr), and the environment variable that holds more of them.
    apprise: tuple[str, ...] = field(default=(), repr=False)
    apprise_env: str | None = None
    # An address learnt from Slack waits for its owner's confirmation before mail goes to it.
    email_confirmed: bool = True
    # A new address waiting for its owner's confirmation; until then `email` gets the mail.
    pending_email: str | None = None
    # How the email looks: "html" (HTML with a plain-text alternative) or "text" (plain
    # text only); abstracts "short" (a few lines, the rest a click away) or "full".
    email_format: EmailFormat = "html"
    abstracts: AbstractLength = "short"
    # A digest past what mail apps show whole (full abstracts): sent as numbered parts,
    # each whole, or as one email that Gmail clips (bot.render.email.render_parts).
    long_emails: LongEmails = "parts"
    # A one-paragraph summary in place of each abstract (a model's, else Hugging Face's),
    # and a language (a BCP 47 tag: "zh", "ja", "de") whose translations of each title and
    # abstract (or summary) stand beside the English. None: English only.
    summaries: bool = False
    language: str | None = None
    # A rule's label (`bot.core.checks.check_label`), by the rule's text: a short name the
    # digests show in place of the rule (subject, headings). A rule without one is shown as
    # itself.
    labels: Mapping[str, str] = field(default_factory=dict)
    # Papers like these (bot.similar): at most `similar_max` papers no rule matched but close
    # to what the subscriber liked are added to a digest, those scoring at least
    # `similar_min` (None: the ranking's default). Without feedback nothing changes.
    similar_max: int = 5
    similar_min: float | None = None

    def label_of(self, rule: str) -> str | None:
        """The label of the rule `rule` (its text as in `rules`), or None."""
        return self.labels.get(rule) or self.labels.get(rule.strip())

    @property
    def wants_texts(self) -> bool:
        """Whether its digests show anything a model writes (summaries, translations)."""
        return self.summaries or self.language is not None

    def takes_categories_of(self, paper: Paper) -> bool:
        """Whether the paper is in one of the subscriber's categories (or any, if none)."""
        if not self.categories:
            return True
        return any(_category_covers(c, pc) for c in self.categories for pc in paper.categories)


def target_label(channel: str, recipient: str) -> str:
    """A destination, for people: `<ada@lab.example>`, `slack #robot-learning`, `apprise
    ntfy://ntfy.example/papers` (a channel "apprise:<key>" is of the kind "apprise")."""
    kind = channel.partition(":")[0]
    return f"<{recipient}>" if kind == "email" else f"{kind} {recipient}"


def version_key(paper_id: str, version: int) -> str:
    """One version of a paper as text ("2411.17700@2"), as queued payloads list them."""
    return f"{paper_id}@{version}"


def announce_kind(announce_type: str | None) -> str:
    """What `include` calls an announce type: new, cross, or replace (for both updates)."""
    return "replace" if announce_type in ("replace", "replace-cross") else announce_type or "new"


def _category_covers(wanted: str, category: str) -> bool:
    """`cs` covers `cs.LG`; `cs.LG` covers only itself. Case does not matter."""
    wanted, category = wanted.casefold(), category.casefold()
    return category == wanted or ("." not in wanted and category.startswith(wanted + "."))


Verdict = Literal["like", "dislike"]
VERDICTS: tuple[Verdict, ...] = ("like", "dislike")
# Where a verdict was given: the config's like/dislike lists, a library file (like_file),
# a command (the CLI, /papers), a button in an email or Slack, the manage page.
FeedbackVia = Literal["config", "file", "command", "slack", "email", "page"]
# Verdicts the config file gives, replaced whole whenever it is read; a verdict given by
# hand (a command, a button, the page) on the same paper wins over them.
DECLARED_VIA: frozenset[str] = frozenset({"config", "file"})


@dataclass(frozen=True, slots=True)
class Feedback:
    """A subscriber's verdict on one paper, with the text the ranking reads."""

    key: str  # a paper id ("2411.18179"), "doi:10.1101/…", or "title:<normalised title>"
    verdict: Verdict
    via: FeedbackVia
    title: str = ""
    text: str = ""  # title and abstract ("" when unknown)
    created: datetime | None = None

    @property
    def liked(self) -> bool:
        return self.verdict == "like"


class Hit(NamedTuple):
    """Where a rule term matched: a character span in the paper's title or abstract; for an
    author, `start` is the author's index in `Paper.authors`; for a category or id, 0..0.

    A named tuple, not a dataclass: the matcher makes hundreds of thousands a day and a
    tuple is built in a third of the time of a frozen dataclass."""

    field: Literal["title", "abstract", "author", "category", "id", "source", "upvotes", "trending"]
    start: int
    end: int
    term: str


# What a paper's written texts are: its summary (in English, or translated: the language
# says), its title translated, its abstract translated.
TextKind = Literal["summary", "title", "abstract"]
TEXT_KINDS: tuple[str, ...] = ("summary", "title", "abstract")
HUGGING_FACE = "Hugging Face"  # who wrote a paper's `ai_summary`


@dataclass(frozen=True, slots=True)
class PaperTexts:
    """What is shown of one paper beyond its own fields, written by a model (or taken from
    Hugging Face): untrusted plain text, checked and capped before it gets here, escaped by
    each renderer. Any of them may be missing (not asked for, or it failed): a renderer
    then shows the paper's own title and abstract."""

    summary: str | None = None  # the English summary, shown in place of the abstract
    summary_by: str | None = None  # who wrote it: the model's name, or HUGGING_FACE
    language: str | None = None  # the tag of the translations below
    title: str | None = None  # the title, translated
    # The text shown in place of the abstract (the summary, when one is shown; else the
    # abstract), translated.
    text: str | None = None


@dataclass(frozen=True, slots=True)
class DigestItem:
    """A paper in a digest, with every rule it matched and where; a paper no rule matched
    but close to what the subscriber liked has no rules, and says which liked paper it is
    closest to (`similar_to`, that paper's title)."""

    paper: Paper
    rules: tuple[str, ...]
    hits: tuple[Hit, ...]
    score: float = 0.0
    similar_to: str | None = None
    rank: int = 0  # in a digest ranked by its reader's verdicts: its place (0 first)


@dataclass(frozen=True, slots=True)
class DigestGroup:
    """The papers of a digest filed under one rule (the best rule each paper matched), or,
    `similar`, the papers no rule matched that are close to what the subscriber liked."""

    rule: str
    items: tuple[DigestItem, ...]
    similar: bool = False


@dataclass(frozen=True, slots=True)
class Closeness:
    """A paper close to what a subscriber liked: its score and the liked paper it is
    closest to (key and title)."""

    paper_id: str
    score: float
    closest_key: str
    closest_title: str


@dataclass(frozen=True, slots=True)
class Ranking:
    """How a subscriber's verdicts order their digest (bot.similar decides, the digest
    applies): a score per candidate paper (higher first), the matched papers pushed out by
    dislikes, and the papers no rule matched that are close enough to add, best first."""

    scores: Mapping[str, float] = field(default_factory=dict)
    dropped: frozenset[str] = frozenset()
    similar: tuple[Closeness, ...] = ()
    # Why the ranking is not what it usually is today (an embeddings endpoint failed and
    # the default ranking stood in), for the reader; None when it is.
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Digest:
    """One subscriber's digest: what to render and send, and its stable identity."""

    subscriber: Subscriber
    digest_id: str  # stable: the same subscriber and papers give the same id
    created: datetime
    groups: tuple[DigestGroup, ...]
    # Matched, but left out by max_papers, or past what one email holds (recorded, not sent).
    omitted: tuple[Paper, ...] = ()
    announced: tuple[date, ...] = field(default=())  # announcement days the papers belong to
    # A digest with no papers is a note: it says why (no announcement today, nothing matched).
    note: str | None = None
    channel: str = "email"  # the kind of channel it is built for ("email", "slack")
    # Summaries and translations by paper id (the subscriber's `summaries`, `language`), and
    # a line for the reader when some could not be written ("3 summaries could not be
    # written today: their abstracts are shown").
    texts: Mapping[str, PaperTexts] = field(default_factory=dict)
    texts_note: str | None = None
    # Matched, but pushed out by the subscriber's dislikes (recorded as left out, not sent),
    # and a line about the ranking for the reader (Ranking.note).
    disliked: tuple[Paper, ...] = ()
    ranking_note: str | None = None
    ranked: bool = False  # ordered by its reader's verdicts (items carry their `rank`)

    @property
    def items(self) -> tuple[DigestItem, ...]:
        return tuple(item for group in self.groups for item in group.items)

    @property
    def count(self) -> int:
        return sum(len(group.items) for group in self.groups)

    @property
    def rules(self) -> tuple[str, ...]:
        """The rules its papers are filed under, in order (not the similar papers' group)."""
        return tuple(group.rule for group in self.groups if not group.similar)

    @property
    def similar(self) -> tuple[DigestItem, ...]:
        """The papers no rule matched, added as close to what the subscriber liked."""
        return tuple(item for group in self.groups if group.similar for item in group.items)
