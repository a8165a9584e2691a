"""Plain terminal text: what `paperbell try` prints for a rule's matches.

Pure: turns a `Trial` into lines, a paper's TeX shown as letters (`bot.render.tex`).
Highlighting is a function the caller passes (`mark`): ANSI styles on a terminal, `*stars*`
in a pipe or a file. It prints no links (a paper's
`url:` id is text), and a paper's own control characters (a feed's ESC sequences, which
would drive the terminal) are shown as U+FFFD, one for one, so hit offsets still hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Protocol

from bot.core.checks import terminal_safe
from bot.core.models import DigestItem, Hit
from bot.render.tex import formulas, letters, letters_segments
from bot.render.text import (
    highlight,
    merge_spans,
    plural,
    slice_segments,
    tidy,
    tidy_author,
    tidy_segments,
    wrap,
)

Mark = Callable[[str], str]


class Trial(Protocol):
    """What one rule matched among some papers (`bot.match.digest.Trial`), as read here:
    render stands on the core alone, so it names the shape, not the stage that makes it."""

    @property
    def items(self) -> Sequence[DigestItem]: ...  # ranked as a digest ranks them

    @property
    def days(self) -> Sequence[tuple[date | None, int, int]]: ...  # (day, matched, papers)

    @property
    def papers(self) -> int: ...  # how many papers were tried


SNIPPET_CONTEXT = 70  # characters of abstract shown on each side of a hit
MAX_SNIPPETS = 2  # pieces of abstract shown per paper


def _safe_item(item: DigestItem) -> DigestItem:
    p = item.paper
    paper = dataclasses.replace(
        p,
        id=terminal_safe(p.id),
        title=terminal_safe(p.title),
        abstract=terminal_safe(p.abstract),
        authors=tuple(terminal_safe(a) for a in p.authors),
        categories=tuple(terminal_safe(c) for c in p.categories),
        announce_type=terminal_safe(p.announce_type),
    )
    return dataclasses.replace(item, paper=paper)


def stars(text: str) -> str:
    """The highlighting of plain text: `*word*`."""
    return f"*{text}*"


def marked(text: str, spans: Sequence[tuple[int, int]], mark: Mark) -> str:
    """`text` with whitespace tidied and the spans passed through `mark`."""
    return "".join(mark(part) if hit else part for part, hit in highlight(text, spans))


def _spans(hits: Sequence[Hit], field: str) -> list[tuple[int, int]]:
    return [(h.start, h.end) for h in hits if h.field == field]


def _outside_math(math: Sequence[tuple[int, int]], left: int, right: int) -> tuple[int, int]:
    """A snippet's edges moved out of the formulas they cut: taken whole when short (or
    when it is all there is), else left out, so a snippet never starts or ends in TeX."""
    for start, end in math:
        if start < left < end:
            whole = end - start <= 2 * SNIPPET_CONTEXT or end >= right
            left = start if whole else end
        if start < right < end:
            whole = end - start <= 2 * SNIPPET_CONTEXT or start <= left
            right = end if whole else start
    return left, right


def abstract_snippet(abstract: str, hits: Sequence[Hit], mark: Mark) -> str:
    """The parts of the abstract around its hits (at most MAX_SNIPPETS), hits marked, TeX
    as letters; empty when nothing matched in the abstract."""
    hit_spans = _spans(hits, "abstract")
    if not merge_spans(hit_spans, len(abstract)):
        return ""
    segments = letters_segments(abstract, hit_spans)
    shown = "".join(part for part, _ in segments)
    spans: list[tuple[int, int]] = []
    position = 0
    for part, hit in segments:
        if hit:
            spans.append((position, position + len(part)))
        position += len(part)
    windows: list[tuple[int, int]] = []
    for start, end in spans:
        left = max(0, start - SNIPPET_CONTEXT)
        right = min(len(shown), end + SNIPPET_CONTEXT)
        if windows and left <= windows[-1][1]:
            windows[-1] = (windows[-1][0], right)
        elif len(windows) < MAX_SNIPPETS:
            windows.append((left, right))
    math = formulas(shown)  # the TeX math left as written: never cut through
    pieces = []
    for left, right in windows:
        # Whole words only: move the edges out of the words they cut.
        while left > 0 and not shown[left - 1].isspace():
            left -= 1
        while right < len(shown) and not shown[right].isspace():
            right += 1
        left, right = _outside_math(math, left, right)
        window = tidy_segments(slice_segments(segments, left, right))
        text = "".join(mark(part) if hit else part for part, hit in window)
        pieces.append(("… " if left > 0 else "") + text + (" …" if right < len(shown) else ""))
    return " ".join(pieces).replace("… …", "…")


def _authors(item: DigestItem, mark: Mark) -> str:
    """The author names as shown, matched ones marked; past 8, the first 3 and the matched."""
    wanted = {h.start for h in item.hits if h.field == "author"}
    names = [
        (i, name) for i, author in enumerate(item.paper.authors) if (name := tidy_author(author))
    ]
    shown = [
        mark(name) if i in wanted else name
        for k, (i, name) in enumerate(names)
        if len(names) <= 8 or k < 3 or i in wanted
    ]
    more = f" et al. ({len(names)} authors)" if len(names) > 8 else ""
    return ", ".join(shown) + more


def _categories(item: DigestItem, mark: Mark) -> str:
    wanted = [h.term.partition(":")[2].casefold() for h in item.hits if h.field == "category"]

    def hit(category: str) -> bool:
        c = category.casefold()
        return any(c == w or c.startswith(w + ".") for w in wanted)

    return " ".join(mark(c) if hit(c) else c for c in item.paper.categories)


def render_trial(
    trial: Trial,
    *,
    mark: Mark = stars,
    limit: int = 20,
    width: int = 100,
    summaries: Mapping[str, tuple[str, str]] | None = None,
) -> list[str]:
    """The lines `paperbell try` prints: the best `limit` matches (0: all), then the count
    per announcement day and a summary; paper texts wrapped to `width` columns (marks
    count as characters: ANSI-styled lines wrap a little early). `summaries` (paper id ->
    summary and who wrote it) are shown in place of the abstract's snippet."""
    lines: list[str] = []
    indent = " " * 5

    def block(text: str) -> None:
        lines.extend(wrap(text, width=max(width, 40), indent=indent).splitlines())

    shown = trial.items if limit == 0 else trial.items[:limit]
    for number, item in enumerate(shown, 1):
        item = _safe_item(item)
        paper = item.paper
        when = paper.announced.isoformat() if paper.announced else "undated"
        kind = f" ({paper.announce_type})" if paper.announce_type != "new" else ""
        lines.append(f"{number:>3}. {paper.id}  {when}{kind}  {_categories(item, mark)}")
        block(marked(paper.title, _spans(item.hits, "title"), mark))
        if paper.authors:
            block(_authors(item, mark))
        written = (summaries or {}).get(paper.id)
        snippet = abstract_snippet(paper.abstract, item.hits, mark)
        if written is not None:
            text, by = written
            block(f"[summary · {terminal_safe(by)}] {tidy(letters(terminal_safe(text)))}")
        elif snippet:
            block(snippet)
        lines.append("")
    if len(shown) < len(trial.items):
        lines.append(f"... and {len(trial.items) - len(shown)} more (--limit 0 shows them all)")
        lines.append("")
    if trial.days:
        lines.append("matches per announcement day:")
        for day, matched, total in trial.days:
            name = f"{day.isoformat()} {day:%a}" if day else "undated       "
            lines.append(
                f"  {name}  {matched:>6,} of {total:,} {'paper' if total == 1 else 'papers'}"
            )
    matched = len(trial.items)
    share = f" ({matched / trial.papers:.1%})" if trial.papers else ""
    papers = "paper" if trial.papers == 1 else "papers"
    summary = f"{matched:,} of {trial.papers:,} {papers} matched{share}"
    if trial.days:
        days = len(trial.days)
        summary += f" over {plural(days, 'announcement day')}: about {matched / days:.1f} a day"
    lines.append(summary)
    return lines
