"""A token that verified is accepted again without its signature checked: only the same token,
never past its expiry or ``remember_s``, never after the keys changed, never one that failed."""

from __future__ import annotations

import json
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from retrieval_server.api.tokens import JwksFile, SharedSecret, TokenVerifier
from retrieval_server.domain import Unauthenticated
from tests.support.tokens import AUDIENCE, ISSUER, SECRET, RsaKeys, claims, hs256

LEEWAY = 30.0


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class CountingKeys:
    """A shared secret whose uses are counted, and whose version the test moves."""

    def __init__(self, secret: str = SECRET) -> None:
        self.secret, self.uses, self.generation = secret, 0, 0

    async def key_for(self, kid: str | None, alg: str) -> Any:
        self.uses += 1
        return self.secret

    def version(self) -> Hashable:
        return self.generation

    async def close(self) -> None:
        return None


def _verifier(keys: Any, clock: Clock, *, remember_s: float = 300.0, remember_max: int = 4096) -> TokenVerifier:
    return TokenVerifier(keys, ("HS256", "RS256"), issuer=ISSUER, audience=AUDIENCE, leeway_s=LEEWAY, remember_s=remember_s,
                         remember_max=remember_max, clock=clock)


async def test_the_same_token_is_checked_once_and_another_token_is_checked_itself() -> None:
    keys, clock = CountingKeys(), Clock()
    verifier = _verifier(keys, clock)
    alice, bob = hs256(claims("alice")), hs256(claims("bob"))
    for _ in range(3):
        assert (await verifier.verify(alice))["sub"] == "alice"
    assert keys.uses == 1
    assert (await verifier.verify(bob))["sub"] == "bob" and keys.uses == 2
    with pytest.raises(TypeError):
        (await verifier.verify(alice))["sub"] = "mallory"  # type: ignore[index]  # shared between calls: read-only


async def test_a_remembered_token_is_checked_again_once_it_expires_or_after_remember_s() -> None:
    keys, clock = CountingKeys(), Clock()
    verifier = _verifier(keys, clock, remember_s=60)
    token = hs256(claims("alice"))  # exp in 600 s
    await verifier.verify(token)
    clock.now += 59
    await verifier.verify(token)
    assert keys.uses == 1
    clock.now += 2  # remember_s is over
    await verifier.verify(token)
    assert keys.uses == 2

    verifier = _verifier(keys, clock, remember_s=3600)
    exp = int(time.time()) + 100
    token = hs256(claims("alice", exp=exp))
    await verifier.verify(token)
    clock.now = exp + LEEWAY - 1
    await verifier.verify(token)
    assert keys.uses == 3
    clock.now = exp + LEEWAY  # where PyJWT calls it expired: checked again (and refused then, by PyJWT's own clock)
    await verifier.verify(token)
    assert keys.uses == 4


async def test_a_token_is_checked_again_when_the_keys_change_and_refused_when_its_key_is_gone() -> None:
    keys, clock = CountingKeys(), Clock()
    verifier = _verifier(keys, clock)
    token = hs256(claims("alice"))
    await verifier.verify(token)
    keys.generation += 1
    keys.secret = "another-secret-that-is-long-enough-0123"
    with pytest.raises(Unauthenticated) as refused:
        await verifier.verify(token)
    assert refused.value.reason == "TOKEN_SIGNATURE"
    with pytest.raises(Unauthenticated):
        await verifier.verify(token)  # a refusal is not remembered as anything
    assert keys.uses == 3


async def test_a_token_that_failed_is_checked_every_time() -> None:
    keys, clock = CountingKeys(), Clock()
    verifier = _verifier(keys, clock)
    forged = hs256(claims("alice"), secret="not-the-secret-but-long-enough-012345")
    for _ in range(3):
        with pytest.raises(Unauthenticated):
            await verifier.verify(forged)
    assert keys.uses == 3


async def test_at_most_remember_max_tokens_are_kept_the_least_recently_used_dropped() -> None:
    keys, clock = CountingKeys(), Clock()
    verifier = _verifier(keys, clock, remember_max=2)
    a, b, c = (hs256(claims(u)) for u in "abc")
    for token in (a, b, a, c):  # c pushes out b, the least recently used
        await verifier.verify(token)
    assert keys.uses == 3
    await verifier.verify(a)
    assert keys.uses == 3
    await verifier.verify(b)
    assert keys.uses == 4


async def test_remember_s_zero_checks_every_call() -> None:
    keys, clock = CountingKeys(), Clock()
    verifier = _verifier(keys, clock, remember_s=0)
    token = hs256(claims("alice"))
    await verifier.verify(token)
    await verifier.verify(token)
    assert keys.uses == 2


async def test_a_replaced_jwks_file_is_another_version_and_revokes_what_its_old_keys_verified(tmp_path: Path) -> None:
    old, new = RsaKeys(), RsaKeys()
    old.add("k1")
    new.add("k2")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(old.jwks()))
    source = JwksFile(path)
    verifier = _verifier(source, Clock())
    token = old.sign(claims("alice"), "k1")
    assert (await verifier.verify(token))["sub"] == "alice"
    first = source.version()
    assert source.version() == first
    path.write_text(json.dumps(new.jwks()) + " " * 64)  # another size, whatever the clock's resolution
    assert source.version() != first
    with pytest.raises(Unauthenticated) as refused:
        await verifier.verify(token)
    assert refused.value.reason == "TOKEN_KEY_UNKNOWN"


def test_a_shared_secret_has_one_version() -> None:
    secret = SharedSecret(SECRET)
    assert secret.version() == secret.version()
