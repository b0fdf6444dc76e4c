"""A request cancelled during query analysis, or analysis past its total timeout or half the time
to the request's deadline, cancels the techniques, and nothing they raise is left unread."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Collection, Sequence
from typing import Any

from retrieval_server.domain import Unavailable
from retrieval_server.workflow.analysis import NotApplicable, analyze


class Held:
    """Every technique waits for ``release``; then each fails as the classical ones do on an empty index."""

    name = "held"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0
        self.cancelled = 0
        self.timed_out_techniques: list[str] = []

    async def _wait(self, error: Exception) -> Any:
        self.started += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise error

    def timed_out(self, techniques: Collection[str]) -> None:
        self.timed_out_techniques.append(list(techniques))

    async def rewrite(self, query: str) -> str:
        return await self._wait(NotApplicable("nothing to normalize or expand"))

    async def reformulate(self, query: str, feedback: Sequence[str]) -> list[str]:
        return await self._wait(NotApplicable("needs the results of a first pass"))

    async def hyde(self, query: str) -> str:
        return await self._wait(Unavailable("needs an LLM"))

    async def decompose(self, query: str) -> list[str]:
        # A technique whose clean-up fails turns its cancellation into another error.
        try:
            return await self._wait(NotApplicable("a single question"))
        except asyncio.CancelledError:
            raise RuntimeError("clean-up failed") from None


async def test_a_cancelled_analysis_cancels_its_techniques_and_leaves_no_exception_unread() -> None:
    loop = asyncio.get_running_loop()
    unread: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unread.append(context))
    analyzer = Held()
    # No per-technique timeout: each technique then runs in the task analyze made (as wait_for
    # always does from Python 3.12), so the clean-up's error ends that task, after its cancellation.
    request = asyncio.ensure_future(analyze(analyzer, "q", [], timeout_s=None, total_timeout_s=60))
    while analyzer.started < 4:
        await asyncio.sleep(0)
    request.cancel()
    while not request.done():
        await asyncio.sleep(0)
    analyzer.release.set()  # a technique still running now fails, as on an empty index
    for _ in range(10):  # the techniques' tasks end after the request
        await asyncio.sleep(0)
    assert request.cancelled()
    assert analyzer.cancelled == 4
    assert analyzer.timed_out_techniques == []  # the request's cancellation is no technique's fault
    # asyncio reports an unread exception when the task is collected; the request's traceback
    # holds analyze's frame, and so its tasks, until the request goes.
    del request
    gc.collect()
    assert unread == []


async def test_techniques_past_the_total_timeout_are_cancelled_and_leave_no_exception_unread() -> None:
    loop = asyncio.get_running_loop()
    unread: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unread.append(context))
    analyzer = Held()
    # A total timeout of 0: every technique has started (and waits) when it passes.
    analysis = await analyze(analyzer, "q", [], timeout_s=None, total_timeout_s=0)
    assert analysis.dropped == dict.fromkeys(("rewrite", "reformulate", "hyde", "decompose"), "timeout (total)")
    # each held to account, in one report (one request's calls are one verdict on a model)
    assert analyzer.timed_out_techniques == [["rewrite", "reformulate", "hyde", "decompose"]]
    analyzer.release.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert analyzer.cancelled == 4
    gc.collect()
    assert unread == []


async def test_a_near_deadline_gives_analysis_half_the_time_left_and_holds_no_technique_to_account() -> None:
    analyzer = Held()
    # 0 s left: the techniques are cut at once, for the request's deadline, not for their slowness.
    analysis = await analyze(analyzer, "q", [], timeout_s=None, total_timeout_s=60, time_left_s=0.0)
    assert analysis.dropped == dict.fromkeys(("rewrite", "reformulate", "hyde", "decompose"), "timeout (deadline)")
    assert analyzer.timed_out_techniques == []
    analyzer.release.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert analyzer.cancelled == 4
    # A deadline further off than twice the total timeout leaves the total timeout in charge.
    far = Held()
    analysis = await analyze(far, "q", [], timeout_s=None, total_timeout_s=0, time_left_s=3600.0)
    assert set(analysis.dropped.values()) == {"timeout (total)"} and len(far.timed_out_techniques) == 1
    far.release.set()
    for _ in range(10):
        await asyncio.sleep(0)


class Slow(Held):
    """Every technique answers ``after`` seconds from its start."""

    def __init__(self, after: float) -> None:
        super().__init__()
        self.after = after

    async def _wait(self, error: Exception) -> Any:
        await asyncio.sleep(self.after)
        raise error


async def test_analysis_gets_half_the_time_left_not_all_of_it() -> None:
    # 0.4 s left: the techniques would answer at 0.3 s, after their 0.2 s.
    analysis = await analyze(Slow(0.3), "q", [], timeout_s=None, total_timeout_s=60, time_left_s=0.4)
    assert analysis.dropped == dict.fromkeys(("rewrite", "reformulate", "hyde", "decompose"), "timeout (deadline)")
