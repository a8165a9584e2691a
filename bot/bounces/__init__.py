"""Bounces: reading what comes back to the bounce address (DSNs, complaints, auto-replies)
from its raw bytes. Pure: bot.pipeline.bounces decides what each one does.
"""

from __future__ import annotations

from bot.bounces.report import BounceReport, Kind, read_bounce

__all__ = ["BounceReport", "Kind", "read_bounce"]
