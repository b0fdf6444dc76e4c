"""The event loops a server process can run on."""

from __future__ import annotations

import asyncio
import sys

import pytest

from retrieval_server import event_loop
from retrieval_server.config import Settings


async def _loop_kind() -> str:
    await asyncio.sleep(0)
    return event_loop.running()


@pytest.mark.parametrize("kind", ["uvloop", "asyncio"])
def test_run_uses_the_loop_it_is_given(kind: event_loop.EventLoop) -> None:
    assert event_loop.run(_loop_kind(), kind) == kind


async def test_async_tests_run_on_the_servers_default_loop() -> None:
    # tests/conftest.py: the suite runs where production does.
    assert await _loop_kind() == Settings.model_fields["event_loop"].default


def test_uvloop_missing_is_a_clear_error_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what an import finds on a platform without it
    main = _loop_kind()
    with pytest.raises(RuntimeError, match="RETRIEVAL_EVENT_LOOP=asyncio"):
        event_loop.run(main, "uvloop")
    assert main.cr_frame is None  # closed, not left to warn that it was never awaited
