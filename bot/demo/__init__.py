"""The offline demo (`paperbell demo`) and what it brings along: the real listings bundled
with the package (`data`), a mail server that saves what it receives (`smtp`), and a
stand-in of the Slack Web API (`slack_standin`), which the tests use too.

This face hands on what the command line, the tests and the benchmarks use. The mail server
needs aiosmtpd, an optional extra (`paperbell[demo]`): `run_demo` and `free_port` are imported
when first asked for, so the bundled data (`try --demo`) works without it.
"""

from typing import Any

from bot.demo.data import (
    DEMO_DAY,
    DEMO_HF_DAY,
    DEMO_SUBSCRIBERS,
    bundled_feed_bytes,
    bundled_hf_papers,
    bundled_papers,
    demo_papers,
)

__all__ = [
    "DEMO_DAY",
    "DEMO_HF_DAY",
    "DEMO_SUBSCRIBERS",
    "bundled_feed_bytes",
    "bundled_hf_papers",
    "bundled_papers",
    "demo_papers",
    "free_port",
    "run_demo",
]


def __getattr__(name: str) -> Any:
    """`run_demo` and `free_port`, imported on first use (they bring aiosmtpd)."""
    if name == "run_demo":
        from bot.demo.run import run_demo

        return run_demo
    if name == "free_port":
        from bot.demo.smtp import free_port

        return free_port
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
