"""The suite's own settings: Hypothesis derandomized in CI, exploring locally (conftest)."""

from __future__ import annotations

import os

from hypothesis import settings


def test_hypothesis_profile_follows_the_environment() -> None:
    chosen = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
    assert settings.default == settings.get_profile(chosen)
    assert settings.default.deadline is None
    if chosen == "ci":
        assert settings.default.derandomize
        assert settings.default.database is None
    else:
        assert not settings.default.derandomize
