"""Benchmark: many subscribers' rules against one (or five) days of all of arXiv.

Owns the figures behind `bot.match.matcher`'s targets. It builds N rules (default 100,000) from
the real vocabulary of the fixture feed (words and 2-3 word phrases of titles and abstracts,
authors' surnames, categories), drawn from a Zipf-like distribution so popular rules repeat
as they do among real subscribers; matches them against the real 1,504-paper listing of
2024-11-28 (and against that listing five times with distinct ids, as five days); times the
same work done naively (every rule x every paper through `bot.rules.match`) on a sample;
checks that both agree; times a run for --subscribers subscribers (1-3 of those rules each:
their rules matched together, then their digests, whose hits are made only for the papers
each digest ranks) against the same with every match's hits made at once, and checks that
both give the same digests; and prints PASS/MISS against the targets. Not part of the test
suite.

    .venv/bin/python bench/match.py [--rules N] [--days D] [--naive-sample K] [--seed S]
                                    [--subscribers M]
    .venv/bin/python bench/match.py --frequencies     # print bot.match.keys's frequency table

Deterministic: the same arguments build the same rules.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import math
import pstats
import random
import resource
import sys
import textwrap
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bot.match.matcher  # noqa: E402
from bot.core.errors import RuleError  # noqa: E402
from bot.core.models import Digest, Paper, Subscriber  # noqa: E402
from bot.demo.data import bundled_papers  # noqa: E402
from bot.match.digest import RuleMatches, build_digest  # noqa: E402
from bot.match.keys import key_frequencies  # noqa: E402
from bot.match.matcher import Matched, Matcher  # noqa: E402
from bot.rules import PaperText, Rule, analyze, match, parse_rule, tokenize  # noqa: E402

TARGET_SECONDS = 1.0  # 100,000 rules x 1,504 papers, one core, papers already analyzed
TARGET_SPEEDUP = 50.0
TARGET_BUILD_SECONDS = 5.0
TARGET_INDEX_MB = 500.0

# The mix of rule shapes, in percent (shapes the grammar of the day cannot parse fall back
# to a single phrase or word).
MIX = {
    "phrase": 28,
    "word": 22,
    "two terms": 20,
    "or": 10,
    "exclusion": 10,
    "category": 5,
    "author": 3,
    "wildcard": 2,
}
FIELD_SHARE = 0.05  # terms written ti:/abs:, when the grammar has fields
URL_WORDS = frozenset({"http", "https", "www", "com", "org", "github", "html"})


# ---------------------------------------------------------------------------------------------
# Vocabulary and rules


class Zipf:
    """Draws items of a ranked list with Zipf-Mandelbrot weights 1 / (rank + q) ** s."""

    def __init__(self, items: Sequence[str], rng: random.Random, s: float = 1.1, q: float = 5):
        self.items = list(items)
        weights = [1 / (rank + q) ** s for rank in range(len(self.items))]
        self.cumulative = list(_accumulate(weights))
        self.rng = rng

    def draw(self) -> str:
        return self.rng.choices(self.items, cum_weights=self.cumulative)[0]


def _accumulate(values: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out


def _ranked(counts: Counter[str], rng: random.Random) -> list[str]:
    """Topics popular with subscribers tend to be ones much published on, with a wide scatter:
    ranked by document frequency x log-normal noise."""
    noisy = {item: count * math.exp(rng.gauss(0, 1.5)) for item, count in sorted(counts.items())}
    return sorted(noisy, key=lambda item: -noisy[item])


@dataclasses.dataclass
class Vocabulary:
    words: Zipf
    phrases: Zipf
    surnames: Zipf
    categories: Zipf
    prefixes: Zipf


def build_vocabulary(papers: Sequence[Paper], rng: random.Random) -> Vocabulary:
    """Words, phrases, surnames and categories of real papers, ranked for Zipf draws.

    Words and phrases are those of titles (titles name topics; abstracts are prose:
    "paves the way"), counted in titles and abstracts."""
    n = len(papers)
    word_df: Counter[str] = Counter()
    phrase_df: Counter[str] = Counter()
    in_titles: set[str] = set()
    surname_df: Counter[str] = Counter()
    category_df: Counter[str] = Counter()
    for paper in papers:
        paper_words: set[str] = set()
        paper_phrases: set[str] = set()
        for text in (paper.title, paper.abstract):
            spelled = [text[t.start : t.end].lower() for t in tokenize(text)]
            found = {
                " ".join(spelled[i : i + size])
                for size in (2, 3)
                for i in range(len(spelled) - size + 1)
            }
            if text is paper.title:
                in_titles.update(spelled)
                in_titles.update(found)
            paper_words.update(spelled)
            paper_phrases.update(found)
        word_df.update(paper_words)
        phrase_df.update(paper_phrases)
        for author in paper.authors:
            parts = author.split()
            if parts and parts[-1].isalpha() and parts[-1][:1].isupper():
                surname_df[parts[-1]] += 1
        category_df.update(paper.categories)
        category_df.update({c.partition(".")[0] for c in paper.categories})
    common = {w for w, c in word_df.items() if c > n // 5}  # "the", "we", "model" ...

    def plain(word: str) -> bool:
        return word.isascii() and word.isalpha() and word not in URL_WORDS

    # Single words subscribers follow are topical: not common, longer than "four".
    topical = Counter(
        {
            w: c
            for w, c in word_df.items()
            if w in in_titles and plain(w) and len(w) >= 5 and c <= n * 0.02
        }
    )
    phrases = Counter(
        {
            p: c
            for p, c in phrase_df.items()
            if p in in_titles
            and c >= 2
            and all(plain(w) for w in p.split())
            and p.split()[0] not in common
            and p.split()[-1] not in common
        }
    )
    prefixes: Counter[str] = Counter()
    for word, count in topical.items():
        if len(word) >= 8:  # transform*, quantiz*: a stem, not a fragment like "moti*"
            prefixes[word[: max(5, len(word) - 3)]] += count
    return Vocabulary(
        words=Zipf(_ranked(topical, rng), rng),
        phrases=Zipf(_ranked(phrases, rng), rng),
        surnames=Zipf(_ranked(surname_df, rng), rng),
        categories=Zipf(_ranked(category_df, rng), rng),
        prefixes=Zipf(_ranked(prefixes, rng), rng),
    )


def _supports(text: str) -> bool:
    try:
        parse_rule(text)
    except RuleError:
        return False
    return True


class RuleMaker:
    """Rule texts of the mix, in the grammar `bot.rules` parses today."""

    def __init__(self, vocabulary: Vocabulary, rng: random.Random) -> None:
        self.v = vocabulary
        self.rng = rng
        self.has_or = _supports("robot OR grasping")
        self.has_fields = _supports("ti:robot")
        self.has_authors = _supports("au:Smith")
        self.has_wildcards = _supports("robo*")
        shapes = list(MIX)
        self.shapes, self.cumulative = shapes, _accumulate([MIX[s] for s in shapes])

    def term(self) -> str:
        phrase = self.rng.random() < 0.55
        text = f'"{self.v.phrases.draw()}"' if phrase else self.v.words.draw()
        if self.has_fields and self.rng.random() < FIELD_SHARE:
            text = self.rng.choice(("ti:", "abs:")) + text
        return text

    def rule(self) -> str:
        rng, v = self.rng, self.v
        shape = rng.choices(self.shapes, cum_weights=self.cumulative)[0]
        if shape == "phrase":
            return f'"{v.phrases.draw()}"'
        if shape == "word":
            return v.words.draw()
        if shape == "two terms":
            return f"{self.term()} {self.term()}"
        if shape == "or" and self.has_or:
            alternatives = " OR ".join(self.term() for _ in range(rng.choice((2, 2, 3))))
            return f"({alternatives}) {self.term()}" if rng.random() < 0.3 else alternatives
        if shape == "exclusion":
            excluded = rng.choice((f"cat:{v.categories.draw()}", v.words.draw()))
            return f"{self.term()} -{excluded}"
        if shape == "category":
            category = f"cat:{v.categories.draw()}"
            return category if rng.random() < 0.3 else f"{category} {self.term()}"
        if shape == "author" and self.has_authors:
            author = f"au:{v.surnames.draw()}"
            return author if rng.random() < 0.5 else f"{author} {self.term()}"
        if shape == "wildcard" and self.has_wildcards:
            return f"{v.prefixes.draw()}*"
        return self.term()


def build_rules(papers: Sequence[Paper], count: int, seed: int) -> list[tuple[int, Rule]]:
    """`count` parsed rules, numbered from 0; deterministic for a seed."""
    rng = random.Random(seed)
    maker = RuleMaker(build_vocabulary(papers, rng), rng)
    parsed: dict[str, Rule] = {}
    made: list[tuple[int, Rule]] = []
    while len(made) < count:
        text = maker.rule()
        rule = parsed.get(text)
        if rule is None:
            try:
                rule = parsed[text] = parse_rule(text)
            except RuleError:
                continue
        made.append((len(made), rule))
    return made


# ---------------------------------------------------------------------------------------------
# Measurements


@dataclasses.dataclass
class Timing:
    cpu: float  # seconds of this process's CPU (one core: the matcher is single-threaded)
    wall: float

    def __str__(self) -> str:
        return f"{self.cpu:.2f} s CPU ({self.wall:.2f} s wall)"


def timed(action: Callable[[], Any]) -> tuple[Any, Timing]:
    """Run `action` once; CPU time is the figure that matters on a shared machine."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    return result, Timing(time.process_time() - cpu, time.perf_counter() - wall)


def best_of(repeat: int, action: Callable[[], Any]) -> tuple[Any, Timing]:
    """The last result and the fastest of `repeat` runs (by CPU time)."""
    runs = [timed(action) for _ in range(repeat)]
    return runs[-1][0], min((timing for _, timing in runs), key=lambda t: t.cpu)


def naive(
    rules: Sequence[tuple[int, Rule]], papers: Sequence[Paper], texts: dict[str, PaperText]
) -> dict[int, list[tuple[Paper, Any]]]:
    """The reference: every rule x every paper through bot.rules.match."""
    found: dict[int, list[tuple[Paper, Any]]] = {}
    for rule_id, rule in rules:
        for paper in papers:
            hits = match(rule, texts[paper.id])
            if hits is not None:
                found.setdefault(rule_id, []).append((paper, hits))
    return found


def as_days(
    papers: Sequence[Paper], texts: dict[str, PaperText], days: int
) -> tuple[list[Paper], dict[str, PaperText]]:
    """The listing `days` times, each copy with distinct ids (`2411.17700` -> `2411.17700d1`)."""
    all_papers, all_texts = list(papers), dict(texts)
    for day in range(1, days):
        for paper in papers:
            copy = dataclasses.replace(paper, id=f"{paper.id}d{day}")
            text = texts[paper.id]
            if hasattr(text, "id"):
                text = dataclasses.replace(text, id=copy.id)
            all_papers.append(copy)
            all_texts[copy.id] = text
    return all_papers, all_texts


class Spent:
    """CPU time spent in some functions (`owner.name`: a module's function, a class's
    method) while the matcher runs, through wrapped copies (the wrappers' own cost is not
    counted)."""

    def __init__(self, *functions: tuple[object, str]) -> None:
        self.functions = functions
        self.seconds = {name: 0.0 for _, name in functions}
        self.calls = {name: 0 for _, name in functions}

    def __enter__(self) -> Spent:
        self.originals = [(owner, name, getattr(owner, name)) for owner, name in self.functions]
        for owner, name, original in self.originals:
            setattr(owner, name, self._timed(name, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in self.originals:
            setattr(owner, name, original)

    def _timed(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] += time.thread_time() - start
                self.calls[name] += 1

        return timed_call


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_frequencies(papers: Sequence[Paper]) -> None:
    """The `_COMMON_PERCENT` table of bot.match.keys: keys in at least 5% of the papers."""
    shares = key_frequencies(analyze(paper) for paper in papers)
    buckets: dict[int, list[str]] = {}
    for key, share in sorted(shares.items()):
        if (percent := int(share * 100)) >= 5 and " " not in key:  # no word pairs
            buckets.setdefault(percent, []).append(key)
    for percent in sorted(buckets, reverse=True):
        lines = textwrap.wrap(" ".join(buckets[percent]), 86)
        if len(lines) == 1:
            print(f'    {percent}: "{lines[0]}",')
            continue
        print(f"    {percent}: (")
        for i, line in enumerate(lines):
            print(f'        "{line}{" " if i < len(lines) - 1 else ""}"')
        print("    ),")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", type=int, default=100_000, help="how many rules")
    parser.add_argument("--days", type=int, default=5, help="days for the multi-day run")
    parser.add_argument(
        "--naive-sample", type=int, default=2_000, help="rules the naive evaluator runs"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of the 1-day match (best)")
    parser.add_argument("--seed", type=int, default=20241128)
    parser.add_argument(
        "--subscribers", type=int, default=10_000, help="digests to build (0: none)"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile one matcher run")
    parser.add_argument("--frequencies", action="store_true", help="print the frequency table")
    args = parser.parse_args(argv)

    papers = tuple(bundled_papers(source="arxiv"))
    if args.frequencies:
        print_frequencies(papers)
        return 0
    print(f"papers: {len(papers):,} (real arXiv listing of 2024-11-28, all archives)")
    print("times: CPU seconds of this process (one core), wall clock in parentheses")

    texts, analyze_time = timed(lambda: {p.id: analyze(p) for p in papers})
    print(
        f"analyze (bot.rules, once per paper, shared by matcher and naive): {analyze_time}"
        f" = {analyze_time.cpu / len(papers) * 1e3:.2f} ms/paper"
    )

    rules, rules_time = timed(lambda: build_rules(papers, args.rules, args.seed))
    print(
        f"rules: {len(rules):,}, {len({rule.text for _, rule in rules}):,} distinct"
        f" (generated and parsed in {rules_time.cpu:.1f} s), e.g."
    )
    for _, rule in rules[:8]:
        print(f"  {rule.text}")

    matcher, build_time = timed(lambda: Matcher(rules))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    probe = Matcher(rules)
    index_mb = (tracemalloc.get_traced_memory()[0] - before) / 1e6
    peak_mb = (tracemalloc.get_traced_memory()[1] - before) / 1e6
    tracemalloc.stop()
    del probe
    print(
        f"\nindex: {matcher.distinct_rules:,} distinct rule trees,"
        f" {matcher.always_evaluated:,} of them evaluated on every paper"
    )
    print(
        f"index build: {build_time}   [target <= {TARGET_BUILD_SECONDS:.0f} s:"
        f" {verdict(build_time.cpu <= TARGET_BUILD_SECONDS)}]"
    )
    print(
        f"index memory (tracemalloc): {index_mb:.0f} MB retained, {peak_mb:.0f} MB peak while"
        f" building   [target <= {TARGET_INDEX_MB:.0f} MB: {verdict(peak_mb <= TARGET_INDEX_MB)}]"
    )

    # One day, papers already analyzed (analysis is bot.rules' and is shared with the naive
    # run): which papers each rule matches, the answer a digest run asks for.
    def one_day() -> Matched:
        matcher.stats = type(matcher.stats)()
        return matcher.match(papers, texts=texts, hits=False)

    found, match_time = best_of(args.repeat, one_day)
    stats, seconds = matcher.stats, match_time.cpu
    print(
        f"\nmatch, 1 day: {len(rules):,} rules x {len(papers):,} papers in {match_time}"
        f" (best of {args.repeat}) = {len(rules) * len(papers) / seconds / 1e6:.0f} M rule x"
        f" paper pairs/s   [target <= {TARGET_SECONDS:.0f} s: {verdict(seconds <= TARGET_SECONDS)}]"
    )
    distinct_pairs = matcher.distinct_rules * len(papers)
    per_rule = sorted(found.bits(rule_id).bit_count() for rule_id, _ in rules)
    print(
        f"  {matcher.distinct_rules:,} distinct trees over {matcher.distinct_leaves:,} distinct"
        f" leaves; candidates {stats.candidates:,} ({stats.candidates / distinct_pairs:.2%} of the"
        f" distinct rule x paper pairs), evaluated {stats.evaluations:,}, matched"
        f" {stats.matches:,}; {sum(per_rule):,} (rule id, paper) results; {len(found):,} rule"
        " ids matched something"
    )
    print(
        "  the workload, papers per rule id: median"
        f" {per_rule[len(per_rule) // 2]}, mean {sum(per_rule) / len(per_rule):.1f},"
        f" p90 {per_rule[len(per_rule) * 9 // 10]}, p99 {per_rule[len(per_rule) * 99 // 100]},"
        f" none {sum(1 for n in per_rule if n == 0) / len(per_rule):.0%}"
    )
    matching = bot.match.matcher
    with Spent((matching, "paper_keys"), (matching, "holds"), (Matcher, "_evaluate")) as spent:
        matcher.match(papers, texts=texts, hits=False)
    keys_s, holds_s, trees_s = (spent.seconds[n] for n in ("paper_keys", "holds", "_evaluate"))
    print(
        f"  of which: paper keys ~{keys_s:.2f} s; asking the"
        f" {matcher.distinct_leaves - matcher.exact_leaves:,} leaves no key decides about the"
        f" papers with their keys (bot.rules.holds) ~{holds_s:.2f} s"
        f" ({spent.calls['holds']:,} calls); the trees on bit sets ~{trees_s:.2f} s; the rest"
        " (recording which papers have which keys) is the matcher's own. No hits are made"
    )
    everything, all_time = best_of(args.repeat, lambda: matcher.match(papers, texts=texts))
    print(
        "  with every match's hits at once (`match(papers)`: rule id -> [(paper, hits)],"
        f" {sum(len(v) for v in everything.values()):,} entries): {all_time}"
    )
    _, with_analyze = timed(lambda: Matcher(rules).match(papers, hits=False))
    print(f"  index build + analyze + match (texts=None), from scratch: {with_analyze}")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        matcher.match(papers, texts=texts, hits=False)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)

    if args.days > 1:
        day_papers, day_texts = as_days(papers, texts, args.days)
        matcher.stats = type(matcher.stats)()
        _, days_time = timed(lambda: matcher.match(day_papers, texts=day_texts, hits=False))
        print(
            f"match, {args.days} days (the same listing {args.days} times, ids made distinct):"
            f" {len(rules):,} rules x {len(day_papers):,} papers in {days_time}"
            f" = {len(rules) * len(day_papers) / days_time.cpu / 1e6:.0f} M pairs/s,"
            f" evaluated {matcher.stats.evaluations:,}"
        )

    # The naive reference on a sample of the rules, extrapolated to all of them.
    sample = random.Random(args.seed).sample(rules, min(args.naive_sample, len(rules)))
    sample.sort(key=lambda item: item[0])
    expected, naive_time = timed(lambda: naive(sample, papers, texts))
    naive_total = naive_time.cpu * len(rules) / len(sample)
    speedup = naive_total / seconds
    print(
        f"\nnaive (bot.rules.match, every rule x every paper, papers analyzed once):"
        f" {len(sample):,} sampled rules x {len(papers):,} papers in {naive_time}"
        f" = {len(sample) * len(papers) / naive_time.cpu / 1e6:.2f} M pairs/s;"
        f" extrapolated to {len(rules):,} rules: {naive_total:.0f} s"
    )
    print(
        f"matcher / naive: {speedup:.0f}x faster   [target >= {TARGET_SPEEDUP:.0f}x:"
        f" {verdict(speedup >= TARGET_SPEEDUP)}]"
    )
    sampled = {rule_id for rule_id, _ in sample}
    got = {rule_id: hits for rule_id, hits in everything.items() if rule_id in sampled}
    on_demand = {
        rule_id: [(papers[i], found.hits(rule_id, i)) for i in found.indexes(rule_id)]
        for rule_id in sampled
        if rule_id in found
    }
    agree = got == expected == on_demand
    print(
        f"agreement on the {len(sample):,} sampled rules x {len(papers):,} papers (papers and"
        f" hits, at once and on demand): {'OK' if agree else 'MISMATCH'}"
    )
    del everything, got, on_demand, expected
    if args.subscribers:
        agree = digests(papers, rules, args.subscribers, args.seed) and agree
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process peak RSS (all of the above: papers, rules, results): {rss_mb:.0f} MB")
    return 0 if agree else 1


# ---------------------------------------------------------------------------------------------
# Digests: the hits of the papers that go out


NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def readers(
    rules: Sequence[tuple[int, Rule]], count: int, seed: int
) -> list[tuple[Subscriber, list[Rule]]]:
    """`count` subscribers with 1-3 of the rules each (the next ones in order: the rules are
    drawn at random already), nothing delivered to them yet, the default cap of 50."""
    rng = random.Random(seed + 1)
    found: list[tuple[Subscriber, list[Rule]]] = []
    at = 0
    for n in range(count):
        taken = [rules[(at + k) % len(rules)][1] for k in range(rng.choice((1, 2, 3)))]
        at += len(taken)
        texts = tuple(rule.text for rule in taken)
        found.append((Subscriber(f"r{n}", f"r{n}@example.org", texts, id=n + 1), taken))
    return found


def build_all(
    subscribers: Sequence[tuple[Subscriber, list[Rule]]],
    papers: Sequence[Paper],
    matches: RuleMatches,
) -> list[Digest | None]:
    """Each subscriber's digest from the matches every subscriber shares, as a run does."""
    return [
        build_digest(sub, rules, papers, delivered={}, now=NOW, matches=matches)
        for sub, rules in subscribers
    ]


def digests(
    papers: Sequence[Paper],
    rules: Sequence[tuple[int, Rule]],
    count: int,
    seed: int,
) -> bool:
    """Time a run's matching and digests for `count` subscribers (their rules matched
    together, the papers analyzed inside, as `bot.pipeline.deliver` does): with hits made
    on demand (`match_rules`: each paper analyzed while matching, and again for its hits
    when a digest first asks for them) against every match's hits made at once (as
    `match_rules` gave them before: each paper analyzed once, its text kept while its hits
    are made); and check that both give the same digests."""
    subscribers = readers(rules, count, seed)
    distinct = {rule.node: rule for _, rules_of in subscribers for rule in rules_of}
    shared = Matcher(distinct.items())  # built once for both (as match_rules builds it)

    def at_once() -> RuleMatches:
        texts = {paper.id: analyze(paper) for paper in papers}
        found = shared.match(papers, texts=texts)
        return {node: {paper.id: hits for paper, hits in found[node]} for node in found}

    with Spent((bot.match.matcher, "analyze")) as reading:
        lazy, lazy_match = timed(lambda: match_rules_with(shared, papers))
        analyzed, papers_read = reading.seconds["analyze"], reading.calls["analyze"]
        built, lazy_build = timed(lambda: build_all(subscribers, papers, lazy))
        again = reading.seconds["analyze"] - analyzed
        read_again = reading.calls["analyze"] - papers_read
    eager, eager_match = timed(at_once)
    expected, eager_build = timed(lambda: build_all(subscribers, papers, eager))
    asked = sum(
        len(lazy.get(node, ()))
        for _, rules_of in subscribers
        for node in {rule.node for rule in rules_of}
    )
    shown = sum(digest.count for digest in built if digest is not None)
    left_out = sum(len(digest.omitted) for digest in built if digest is not None)
    results = sum(len(matched) for matched in eager.values())
    lazy_total, eager_total = lazy_match.cpu + lazy_build.cpu, eager_match.cpu + eager_build.cpu
    print(
        f"\na run for {count:,} subscribers (1-3 rules each: {len(distinct):,} distinct of"
        f" {sum(len(r) for _, r in subscribers):,}; nothing delivered before, at most 50"
        f" papers each) over {len(papers):,} papers, analyzed inside (index build not counted):"
    )
    print(
        f"  hits on demand (match_rules): match {lazy_match} (analyzing {analyzed:.2f} s);"
        f" {count:,} digests {lazy_build}, with the hits of {asked:,} (rule, paper) matches"
        f" ({shown:,} papers shown, {left_out:,} left out by the cap; analyzing {read_again:,}"
        f" papers again for their hits {again:.2f} s); total {lazy_total:.2f} s CPU"
    )
    print(
        f"  baseline, every match's hits at once ({results:,} (rule tree, paper) entries, as"
        f" match_rules gave them before): match {eager_match}; digests {eager_build};"
        f" total {eager_total:.2f} s CPU; on demand / at once: {lazy_total / eager_total:.2f}"
    )
    same = built == expected
    print(f"digests equal: {'OK' if same else 'MISMATCH'}")
    return same


def match_rules_with(matcher: Matcher, papers: Sequence[Paper]) -> RuleMatches:
    """What `bot.match.digest.match_rules(rules, papers)` returns, from a matcher built
    already (its build is the same either way)."""
    return cast(RuleMatches, matcher.match(papers, hits=False))


if __name__ == "__main__":
    sys.exit(main())
