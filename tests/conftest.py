from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator, Mapping

import pytest
from hypothesis import HealthCheck, settings

from retrieval_server.config import Settings
from retrieval_server.event_loop import loop_factory

# Keep test logs readable and the thread count fixed on the 2-core machines.
os.environ.setdefault("RETRIEVAL_LOG_FORMAT", "text")
# The suite's indexes use the int8 build without timing both builds first (seconds per fresh index);
# tests/integration/test_model_choice.py covers the measured choice.
os.environ.setdefault("RETRIEVAL_MODEL", "int8")

# Property tests check values, never speed: on a busy machine an example may take longer than
# hypothesis's 200 ms deadline, and generating one longer than its too_slow health check allows.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Every async test on the loop a server runs on by default (RETRIEVAL_EVENT_LOOP); the standard
    loop is served in tests/e2e/test_process.py."""
    return {"default": loop_factory(Settings.model_fields["event_loop"].default)}


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    """The root logger's handlers and level, and the levels of the loggers the server configures,
    as they were after every test: one that configures logging as the server does (configure(),
    cli.main) left "retrieval_server" at INFO, and a later test's DEBUG records were never made."""
    root, loggers = logging.getLogger(), {name: logging.getLogger(name).level for name in ("httpx", "httpcore", "retrieval_server")}
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level
    for name, was in loggers.items():
        logging.getLogger(name).setLevel(was)
