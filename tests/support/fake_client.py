"""A stand-in for ``retrieval_client.RetrievalClient`` as the CLI's commands use it: made with any
arguments, used as a context manager, closed. A test subclasses it with the calls it answers."""

from __future__ import annotations

from typing import Self


class FakeClient:
    def __init__(self, *_: object, **__: object) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        pass

    def close(self) -> None:
        pass
