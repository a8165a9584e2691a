"""Paired fan-out runs: this checkout's `bench/fanout.py` and another's, in turns.

    .venv/bin/python bench/compare.py /tmp/base                 # 2 rounds, 10,000 subscribers
    .venv/bin/python bench/compare.py /tmp/base --rounds 3 -- --subscribers 2000

Make the other checkout with `git worktree add /tmp/base <commit>`. Each round runs the
other checkout's bench, then this one's (the order alternates from round to round, so
that neither always runs first), each with this interpreter and from an empty working
directory: `python -m` puts its working directory first on sys.path, and a run started
from one checkout would import that checkout's code whichever bench it ran (the fifth
session's paired runs compared the same code with itself). Arguments after `--` go to
both benches. Prints each run's figures as it ends, then one line per checkout: its
rates, CPU, first message and memory, and the ratio of this checkout's mean rate to the
other's.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = re.compile(
    r"in (?P<seconds>[\d.]+) s = (?P<rate>\d+) msg/s \(CPU (?P<cpu>[\d.]+) s\), "
    r"first after (?P<first>[\d.]+) s.*all processes: (?P<memory>\d+) MB resident"
)
SHOWN = (
    "anchor:",
    "  (the same loop",
    "paperbell digest:",
    "ratio to the anchor",
    "CPU by process",
)


def run(checkout: Path, passed: list[str]) -> dict[str, float] | None:
    """One fan-out run of `checkout`'s bench; its figures (None: it failed)."""
    with tempfile.TemporaryDirectory(prefix="paperbell-compare-") as empty:
        result = subprocess.run(
            [sys.executable, str(checkout / "bench" / "fanout.py"), *passed],
            cwd=empty,
            capture_output=True,
            text=True,
        )
    for line in result.stdout.splitlines():
        if line.startswith(SHOWN):
            print(f"  {line}")
    found = FIGURES.search(result.stdout)
    if result.returncode != 0 or found is None:
        print(result.stdout[-2000:] + result.stderr[-2000:])
        return None
    return {name: float(value) for name, value in found.groupdict().items()}


def summary(name: str, runs: list[dict[str, float]]) -> str:
    def span(key: str) -> str:
        values = [r[key] for r in runs]
        low, high = min(values), max(values)
        return f"{low:g}" if low == high else f"{low:g}-{high:g}"

    return (
        f"{name}: {span('rate')} msg/s, CPU {span('cpu')} s, first after {span('first')} s, "
        f"{span('memory')} MB for all processes ({len(runs)} runs)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Arguments after -- go to bench/fanout.py."
    )
    parser.add_argument("other", type=Path, help="the checkout to compare this one with")
    parser.add_argument("--rounds", type=int, default=2)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    fanout = argv[cut + 1 :]
    other = args.other.resolve()
    if not (other / "bench" / "fanout.py").exists():
        sys.exit(f"{other} is not a paperbell checkout with bench/fanout.py")
    passed = fanout or ["--subscribers", "10000", "--anchor-messages", "1000"]
    results: dict[str, list[dict[str, float]]] = {"other": [], "this": []}
    for number in range(args.rounds):
        order = [("other", other), ("this", ROOT)]
        for name, checkout in order if number % 2 == 0 else order[::-1]:
            print(f"round {number + 1}, {name} ({checkout}):", flush=True)
            figures = run(checkout, passed)
            if figures is None:
                print(f"the run of {checkout} failed")
                return 1
            results[name].append(figures)
    print(summary(f"other ({other})", results["other"]))
    print(summary(f"this ({ROOT})", results["this"]))
    ratio = statistics.mean(r["rate"] for r in results["this"]) / statistics.mean(
        r["rate"] for r in results["other"]
    )
    print(f"this checkout's mean rate / the other's: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
