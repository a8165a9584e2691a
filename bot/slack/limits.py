"""How often one Slack user may run a costly command: a count per user over a sliding
window, kept in memory (one process's count; a restart forgets it).

Plain logic: the time is passed in, never read here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass
class PerUserLimit:
    """At most `limit` uses per user in any `window` (a use a whole `window` old is gone)."""

    limit: int
    window: timedelta
    # user id -> when their uses in the window came, oldest first.
    _uses: dict[str, deque[datetime]] = field(default_factory=dict, repr=False)

    def take(self, user_id: str, now: datetime) -> bool:
        """Whether `user_id` may use it now; if so, this use counts."""
        for user in [u for u, times in self._uses.items() if now - times[-1] >= self.window]:
            del self._uses[user]  # nobody's old uses are kept
        times = self._uses.setdefault(user_id, deque())
        while times and now - times[0] >= self.window:
            times.popleft()
        if len(times) >= self.limit:
            return False
        times.append(now)
        return True

    def give_back(self, user_id: str, now: datetime) -> None:
        """Uncount the use `take` counted at `now` (it did nothing worth counting)."""
        times = self._uses.get(user_id)
        if times is not None and now in times:
            times.remove(now)
            if not times:  # `take` reads each user's latest use
                del self._uses[user_id]
