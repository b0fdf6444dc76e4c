"""A request cancelled during query analysis cancels the analysis, and nothing is left unread."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence
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

    async def _wait(self, error: Exception) -> Any:
        self.started += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise error

    async def rewrite(self, query: str) -> str:
        return await self._wait(NotApplicable("nothing to normalize or expand"))

    async def reformulate(self, query: str, feedback: Sequence[str]) -> list[str]:
        return await self._wait(NotApplicable("needs the results of a first pass"))

    async def hyde(self, query: str) -> str:
        return await self._wait(Unavailable("needs an LLM"))

    async def decompose(self, query: str) -> list[str]:
        return await self._wait(NotApplicable("a single question"))


async def test_a_cancelled_analysis_cancels_its_techniques_and_leaves_no_exception_unread() -> None:
    loop = asyncio.get_running_loop()
    unread: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unread.append(context))
    analyzer = Held()
    request = asyncio.ensure_future(analyze(analyzer, "q", [], timeout_s=60, total_timeout_s=60))
    while analyzer.started < 4:
        await asyncio.sleep(0)
    request.cancel()
    while not request.done():
        await asyncio.sleep(0)
    analyzer.release.set()  # a technique still running now fails, as on an empty index
    for _ in range(10):  # the techniques' tasks end after the request
        await asyncio.sleep(0)
    gc.collect()  # asyncio reports an unread exception when the task is collected
    assert request.cancelled()
    assert analyzer.cancelled == 4
    assert unread == []
