"""Rendering alone: N digest emails rendered in this process, as a render worker renders them.

    .venv/bin/python bench/render.py                      # 2,000 subscribers, best of 3
    .venv/bin/python bench/render.py --subscribers 5000 --repeat 1
    .venv/bin/python bench/render.py --profile out.prof   # cProfile one pass

What a fan-out run's render worker does for each digest (`EmailKind.render`: the signed
links, `render_digest`, `build_message_bytes`), without the run around it: no database, no
pool, no SMTP, so its CPU time per digest is measured to a few percent where a whole
`bench/fanout.py` run varies by more. The digests are the fan-out's: the real listing of
2024-11-28 (the copy bundled in bot/data/demo/), N email subscribers with 1-3 `ti:`
one-word rules drawn from its title words (Zipf over document frequency, seeded), matched
and built as `bot.pipeline.deliver` does, the links signed. Two figures, CPU time per
digest: the first pass, cold (the caches empty, as a worker starts: its first digests fill
them), and the best of `--repeat` further passes over the same digests, warm (every paper's
view and wrapped text found in the caches: a floor no run reaches; a fan-out's worker lies
between the two). Also the mean message size.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fanout import drawn_rules, topical_words, zipf_weights  # noqa: E402  (bench/, beside this)

from bot.channels import load_builtin_channels  # noqa: E402
from bot.channels.base import RenderContext  # noqa: E402
from bot.channels.email import EmailChannelSettings, EmailKind, SmtpSettings  # noqa: E402
from bot.channels.linking import Linker  # noqa: E402
from bot.core.links import LinkSigner, max_ages  # noqa: E402
from bot.core.models import Digest, Subscriber  # noqa: E402
from bot.demo import bundled_papers  # noqa: E402
from bot.match.digest import build_digest, match_rules  # noqa: E402
from bot.render import text as text_module  # noqa: E402
from bot.render.email import EmailSettings  # noqa: E402
from bot.rules import parse_rule  # noqa: E402

NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


def subscribers(count: int, titles: list[str], seed: int) -> list[Subscriber]:
    """`count` email subscribers, each with 1-3 `ti:` title words, drawn as
    bench/fanout.py draws them."""
    words = topical_words(titles)
    weights = zipf_weights(len(words))
    rng = random.Random(seed)
    return [
        Subscriber(
            id=number,
            name=f"reader{number}",
            email=f"reader{number}@bench.example",
            email_confirmed=True,
            created=datetime(2024, 1, 1, tzinfo=UTC),
            rules=tuple(drawn_rules(rng, words, weights)),
        )
        for number in range(1, count + 1)
    ]


def digests(count: int, seed: int) -> list[Digest]:
    papers = tuple(bundled_papers())
    people = subscribers(count, [paper.title for paper in papers], seed)
    parsed = {sub.name: [parse_rule(rule) for rule in sub.rules] for sub in people}
    matches = match_rules((rule for rules in parsed.values() for rule in rules), papers)
    built = []
    for sub in people:
        digest = build_digest(
            sub,
            parsed[sub.name],
            papers,
            delivered={},
            now=NOW,
            since=NOW.date() - timedelta(days=1),
            matches=matches,
        )
        if digest is not None:
            built.append(digest)
    return built


def render_all(found: list[Digest], context: RenderContext) -> int:
    """Every digest rendered as a worker renders it; the bytes of all the messages."""
    size = 0
    for digest in found:
        target = EmailKind.targets(digest.subscriber, None)[0]
        size += len(EmailKind.render(digest, target, context).payload)
    return size


def clear_caches() -> None:
    """Every functools cache of the renderers (a worker starts with none)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith(("bot.render", "bot.channels")):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def paired_without(
    name: str, found: list[Digest], context: RenderContext, rounds: int, per: float
) -> None:
    """Warm passes with and without the cache `bot.render.text.<name>`, alternated: what
    that cache saves, beside its baseline in the same run."""
    cached = getattr(text_module, name)
    with_cache, without_cache = [], []
    for _ in range(rounds):
        with_cache.append(timed(render_all, found, context) * per)
        setattr(text_module, name, cached.__wrapped__)
        try:
            without_cache.append(timed(render_all, found, context) * per)
        finally:
            setattr(text_module, name, cached)
    shown = " ".join
    print(f"warm with {name} cached: {shown(f'{t:.2f}' for t in with_cache)} ms a digest")
    print(f"warm without it:        {shown(f'{t:.2f}' for t in without_cache)} ms a digest")


def timed(action: Callable[..., object], *args: object) -> float:
    """The CPU time of `action(*args)`, after a full collection."""
    gc.collect()
    start = time.process_time()
    action(*args)
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", type=Path, help="cProfile one warm pass into this file")
    parser.add_argument(
        "--without",
        metavar="CACHE",
        help="also time warm passes with this functools cache of bot.render.text bypassed "
        "(e.g. tidy_author), paired with passes that use it",
    )
    args = parser.parse_args()
    load_builtin_channels()
    start = time.process_time()
    found = digests(args.subscribers, args.seed)
    print(
        f"{len(found):,} digests for {args.subscribers:,} subscribers (the listing of "
        f"2024-11-28), built in {time.process_time() - start:.1f} s; "
        f"{sum(d.count for d in found) / len(found):.1f} papers a digest on average"
    )
    signer = LinkSigner(
        "k" * 40,
        "https://papers.bench.example",
        max_age=max_ages(manage_days=30, unsubscribe_days=60, confirm_days=2),
    )
    linker = Linker(NOW, signer)
    message = EmailSettings(from_addr="digest@papers.bench.example")
    settings = {"email": EmailChannelSettings(SmtpSettings("localhost", 25), message)}
    context = RenderContext(NOW, settings, links=linker.links, votes=linker.votes)
    clear_caches()
    size = 0

    def cold() -> None:
        nonlocal size
        size = render_all(found, context)

    first = timed(cold)
    per = 1000 / len(found)
    print(
        f"cold (caches empty): {first * per:.2f} ms a digest; messages "
        f"{size / len(found) / 1024:.1f} KB on average"
    )
    warm = min(timed(render_all, found, context) for _ in range(args.repeat))
    print(f"warm (best of {args.repeat}): {warm * per:.2f} ms a digest")
    if args.without:
        paired_without(args.without, found, context, args.repeat, per)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(render_all, found, context)
        profiler.dump_stats(args.profile)
        print(f"profile of a warm pass: {args.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
