"""At most one log line per key and interval, for failures every request meets while a store is down."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

#: seconds between two lines of one key: a store down for 90 s under load logged 32,235 lines and
#: 2,006 tracebacks, each request's legs one or more
EVERY_S = 60.0


@dataclass(slots=True)
class LogLimit:
    """Whether a key's line is due; held by the component that logs, so its keys (a leg and an
    error kind: a few dozen) live as long as it does, with no task to clean them."""

    every_s: float = EVERY_S
    clock: Callable[[], float] = time.monotonic
    _last: dict[Hashable, float] = field(default_factory=dict, init=False)

    def due(self, key: Hashable) -> bool:
        """True at most once per ``every_s`` for ``key``; when True, the line is taken as logged now."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            return False
        self._last[key] = now
        return True
