"""The JWKS URL key source: cached, fetched again for an unknown kid, rate-limited, kept on failure."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval_server.api.tokens import JwksUrl
from retrieval_server.domain import Unauthenticated, Unavailable
from tests.support.clock import Clock
from tests.support.http_servers import get_json_server
from tests.support.tokens import RsaKeys


async def test_unknown_kids_cannot_hammer_the_identity_provider() -> None:
    keys = RsaKeys()
    keys.add("k1")
    clock = Clock()
    with get_json_server(keys.jwks) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=30, clock=clock)
        try:
            assert await source.key_for("k1", "RS256") is not None
            for i in range(50):  # a flood of forged kids within the refresh interval
                with pytest.raises(Unauthenticated):
                    await source.key_for(f"forged-{i}", "RS256")
            assert len(idp.requests) == 1
            clock.now = 31  # after the interval, an unknown kid may fetch again: once
            keys.add("k2")
            assert await source.key_for("k2", "RS256") is not None
            assert len(idp.requests) == 2
            clock.now = 400  # past the cache lifetime the next use fetches
            await source.key_for("k1", "RS256")
            assert len(idp.requests) == 3
        finally:
            await source.close()


async def test_fetch_failures_keep_the_known_keys_and_say_unavailable_without_any() -> None:
    keys = RsaKeys()
    keys.add("k1")
    clock = Clock()
    state: dict[str, Any] = {"up": True}

    def body() -> Any:
        return keys.jwks() if state["up"] else "not a jwks"

    with get_json_server(body) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=10, min_refresh_s=0, clock=clock)
        try:
            await source.key_for("k1", "RS256")
            state["up"] = False
            clock.now = 20
            assert await source.key_for("k1", "RS256") is not None  # stale but known keys serve
        finally:
            await source.close()
    down = JwksUrl("http://127.0.0.1:9/jwks", cache_s=10, min_refresh_s=0, clock=clock)
    try:
        with pytest.raises(Unavailable):
            await down.key_for("k1", "RS256")
    finally:
        await down.close()
