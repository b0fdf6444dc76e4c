"""A dependency with one of its methods intercepted, for tests that hold, delay, count or
interleave one call of a real store, model or cache."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any


class Intercepted:
    """Wraps a dependency: its method ``name`` is called through ``around(method, *args, **kwargs)``."""

    def __init__(self, inner: Any, name: str, around: Callable[..., Awaitable[Any]]) -> None:
        self._inner, self._name, self._around = inner, name, around

    def __getattr__(self, attr: str) -> Any:
        method = getattr(self._inner, attr)
        if attr != self._name:
            return method

        async def intercepted(*args: Any, **kwargs: Any) -> Any:
            return await self._around(method, *args, **kwargs)

        return intercepted
