"""The ground floor: data types, the arXiv calendar, schedules, links, checks, errors.

Everything here is pure (no I/O library, no environment, no clock) and imports nothing of
paperbell above it: every other layer may use it.
"""
