"""A circuit breaker for an optional dependency: stop paying its timeout while it is down.

Closed: calls go through; ``failure_threshold`` consecutive failures open it. Open: calls are
refused at once for ``cooldown_s``. Then half-open: one trial call goes through (the others are
still refused); its success closes the breaker, its failure opens it for another cool-down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


class CircuitOpen(Exception):
    """The cause of each exception a breaker raises to refuse a call: a designed state, which
    Health and the responses' degraded tags report, not a failure to log with a traceback."""


def refused_by_breaker(exc: BaseException) -> bool:
    """Whether ``exc`` is a breaker's refusal, not the dependency's failure."""
    return isinstance(exc.__cause__, CircuitOpen)


@dataclass(slots=True)
class CircuitBreaker:
    """Logs its opening (WARNING, with the failure that opened it) and its closing (INFO), once
    each, naming ``name``: while it is open, the calls it refuses are not worth a line each."""

    failure_threshold: int = 3
    cooldown_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    name: str = "dependency"
    _failures: int = field(default=0, init=False)
    _opened_at: float | None = field(default=None, init=False)
    _trial_in_flight: bool = field(default=False, init=False)

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    @property
    def failures(self) -> int:
        """Failures since the last success."""
        return self._failures

    def allow(self) -> bool:
        """Whether a call may go through now (in half-open state, only one trial at a time)."""
        if self._opened_at is None:
            return True
        if self._trial_in_flight or self.clock() - self._opened_at < self.cooldown_s:
            return False
        self._trial_in_flight = True
        return True

    def record_success(self) -> None:
        if self._opened_at is not None:
            log.info("%s: circuit closed: a trial call succeeded", self.name)
        self._failures, self._opened_at, self._trial_in_flight = 0, None, False

    def record_failure(self, cause: BaseException | None = None) -> None:
        """``cause``: the failure, named in the log line when it opens the breaker."""
        self._failures += 1
        self._trial_in_flight = False
        if self._opened_at is None and self._failures >= self.failure_threshold:
            said = f": {type(cause).__name__}: {str(cause)[:300]}" if cause is not None else ""
            log.warning("%s: circuit open after %d consecutive failures, calls refused for %g s at a time until a trial "
                        "call succeeds%s", self.name, self._failures, self.cooldown_s, said)
        if self._opened_at is not None or self._failures >= self.failure_threshold:
            self._opened_at = self.clock()

    def reset(self) -> None:
        self.record_success()

    def release_trial(self) -> None:
        """A half-open trial ended with no verdict: the next call may be the trial."""
        self._trial_in_flight = False

    @contextlib.contextmanager
    def calling(self, refused: Callable[[], Exception], neutral: tuple[type[Exception], ...] = ()) -> Iterator[None]:
        """Around one call: raise ``refused()`` while open; count how the call ends. An exception
        of a ``neutral`` type says the request was at fault, not the dependency: it counts neither way.

        A cancellation is no verdict on the dependency: the caller gave up (its client went away,
        its deadline passed, a stream was left unread), and one request's four cancelled analysis
        calls would otherwise open the breaker for every caller. It counts neither way, and a trial
        it ends lets the next call be the trial. Whoever cancels a call for passing the operator's
        limit on it (an analysis technique's timeout, a tool's) says so with :meth:`record_failure`;
        a request's own deadline is the caller's budget, and counts neither way. So does a failure
        the call saw before it was cancelled (an attempt that failed, the call waiting to retry):
        the call counts that one with :meth:`record_failure`.
        """
        if not self.allow():
            raise refused() from CircuitOpen(self.name)
        try:
            yield
        except (asyncio.CancelledError, GeneratorExit):
            self.release_trial()
            raise
        except neutral:
            self.release_trial()
            raise
        except BaseException as exc:
            self.record_failure(exc)
            raise
        self.record_success()
