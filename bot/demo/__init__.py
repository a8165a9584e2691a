"""The offline demo (`paperbell demo`) and what it brings along: the real listings bundled
with the package (`data`), a mail server that saves what it receives (`smtp`), and a
stand-in of the Slack Web API (`slack_standin`), which the tests use too.

This face hands on what the command line, the tests and the benchmarks use.
"""

from bot.demo.data import (
    DEMO_DAY,
    DEMO_HF_DAY,
    DEMO_SUBSCRIBERS,
    bundled_feed_bytes,
    bundled_hf_papers,
    bundled_papers,
)
from bot.demo.run import run_demo
from bot.demo.smtp import free_port

__all__ = [
    "DEMO_DAY",
    "DEMO_HF_DAY",
    "DEMO_SUBSCRIBERS",
    "bundled_feed_bytes",
    "bundled_hf_papers",
    "bundled_papers",
    "free_port",
    "run_demo",
]
