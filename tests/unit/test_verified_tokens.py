"""A token that verified is accepted again without its signature checked: only the same token,
never past its expiry or ``remember_s``, never after the keys changed, never one that failed."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from retrieval_server.api.identity import REMEMBERED_BYTES, held_bytes
from retrieval_server.api.tokens import JwksFile, JwksUrl, SharedSecret, TokenVerifier
from retrieval_server.backends.http_body import MAX_RESPONSE_BYTES
from retrieval_server.domain import Unauthenticated, Unavailable
from tests.support.clock import Clock
from tests.support.http_servers import get_json_server, json_server
from tests.support.tokens import AUDIENCE, ISSUER, SECRET, RsaKeys, claims, hs256

LEEWAY = 30.0


class CountingKeys:
    """A shared secret whose uses are counted, and whose version the test moves."""

    def __init__(self, secret: str = SECRET) -> None:
        self.secret, self.uses, self.generation = secret, 0, 0

    async def keys_for(self, kid: str | None, alg: str) -> tuple[Any, ...]:
        self.uses += 1
        return (self.secret,)

    def version(self) -> Hashable | None:
        return self.generation

    async def close(self) -> None:
        return None


def _verifier(keys: Any, clock: Clock, *, remember_s: float = 300.0, remember_max: int = 4096) -> TokenVerifier:
    # One clock for the wall (exp) and the monotonic (remember_s) parts, moved by the test.
    return TokenVerifier(keys, ("HS256", "RS256"), issuer=ISSUER, audience=AUDIENCE, leeway_s=LEEWAY, remember_s=remember_s,
                         remember_max=remember_max, clock=clock, monotonic=clock)


async def test_the_same_token_is_checked_once_and_another_token_is_checked_itself() -> None:
    keys, clock = CountingKeys(), Clock(time.time())
    verifier = _verifier(keys, clock)
    alice, bob = hs256(claims("alice")), hs256(claims("bob"))
    for _ in range(3):
        assert (await verifier.verify(alice))["sub"] == "alice"
    assert keys.uses == 1
    assert (await verifier.verify(bob))["sub"] == "bob" and keys.uses == 2
    with pytest.raises(TypeError):
        (await verifier.verify(alice))["sub"] = "mallory"  # type: ignore[index]  # shared between calls: read-only


async def test_a_remembered_token_is_checked_again_once_it_expires_or_after_remember_s() -> None:
    keys, clock = CountingKeys(), Clock(time.time())
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
    clock.now = exp + LEEWAY  # where PyJWT calls it expired: checked again (PyJWT then reads its own clock)
    await verifier.verify(token)
    assert keys.uses == 4


async def test_a_token_is_checked_again_when_the_keys_change_and_refused_when_its_key_is_gone() -> None:
    keys, clock = CountingKeys(), Clock(time.time())
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
    keys, clock = CountingKeys(), Clock(time.time())
    verifier = _verifier(keys, clock)
    forged = hs256(claims("alice"), secret="not-the-secret-but-long-enough-012345")
    for _ in range(3):
        with pytest.raises(Unauthenticated):
            await verifier.verify(forged)
    assert keys.uses == 3


async def test_at_most_remember_max_tokens_are_kept_the_least_recently_used_dropped() -> None:
    keys, clock = CountingKeys(), Clock(time.time())
    verifier = _verifier(keys, clock, remember_max=2)
    a, b, c = (hs256(claims(u)) for u in "abc")
    for token in (a, b, a, c):  # c pushes out b, the least recently used
        await verifier.verify(token)
    assert keys.uses == 3
    await verifier.verify(a)
    assert keys.uses == 3
    await verifier.verify(b)
    assert keys.uses == 4


async def test_remembered_tokens_are_held_to_a_budget_of_bytes() -> None:
    """By count alone, 4,096 tokens of 300 groups held their 76 MB and 120 MiB of claims a process
    (about 2.5 GiB at 1,000 groups of 255 characters): the least recently used go to stay in budget."""
    keys, clock = CountingKeys(), Clock(time.time())
    verifier = _verifier(keys, clock)
    groups = [f"department-{i:04d}-with-a-realistic-group-name" for i in range(300)]
    tokens = [hs256(claims(f"user-{u}", groups=groups)) for u in range(400)]  # about 50 KB each: 20 MB
    for token in tokens:
        await verifier.verify(token)
    uses = keys.uses
    await verifier.verify(tokens[-1])
    assert keys.uses == uses  # the newest kept
    await verifier.verify(tokens[0])
    assert keys.uses == uses + 1  # the oldest gone
    assert 0 < verifier._held <= REMEMBERED_BYTES and len(verifier._verified) < len(tokens)
    keys.generation += 1  # each verified again, replacing what was remembered: the weight follows
    for token in tokens[-3:]:
        await verifier.verify(token)
    assert verifier._held == sum(v.weight for v in verifier._verified.values()) <= REMEMBERED_BYTES
    alone = TokenVerifier(keys, ("HS256",), issuer=ISSUER, audience=AUDIENCE, leeway_s=LEEWAY, remember_s=300, remember_bytes=1_000,
                          clock=clock, monotonic=clock)
    uses = keys.uses
    for _ in range(2):  # over the whole budget: verified every time, never kept
        await alone.verify(tokens[0])
    assert keys.uses == uses + 2 and not alone._verified and alone._held == 0


class GatedKeys(CountingKeys):
    """Its key is handed out once the test opens the gate, as a JWKS fetched again would be."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.waiting = asyncio.Event(), 0

    async def keys_for(self, kid: str | None, alg: str) -> tuple[Any, ...]:
        self.waiting += 1
        await self.gate.wait()
        return await super().keys_for(kid, alg)


async def test_calls_of_one_token_that_waited_together_for_its_key_count_it_once() -> None:
    """Each remembered it, and the weight of all but the last stayed counted: the budget filled
    with bytes nobody held, until no token was remembered at all."""
    keys, clock = GatedKeys(), Clock(time.time())
    verifier = _verifier(keys, clock)
    token = hs256(claims("alice", groups=["engineering", "research"]))
    calls = [asyncio.ensure_future(verifier.verify(token)) for _ in range(4)]
    while keys.waiting < len(calls):
        await asyncio.sleep(0)
    keys.gate.set()
    await asyncio.gather(*calls)
    assert len(verifier._verified) == 1 and verifier._held == sum(v.weight for v in verifier._verified.values())


async def test_remember_s_zero_checks_every_call() -> None:
    keys, clock = CountingKeys(), Clock(time.time())
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
    verifier = _verifier(source, Clock(time.time()))
    token = old.sign(claims("alice"), "k1")
    assert (await verifier.verify(token))["sub"] == "alice"
    first = source.version()
    assert source.version() == first
    path.write_text(json.dumps(new.jwks()) + " " * 64)  # another size, whatever the clock's resolution
    assert source.version() != first
    with pytest.raises(Unauthenticated) as refused:
        await verifier.verify(token)
    assert refused.value.reason == "TOKEN_KEY_UNKNOWN"


async def test_a_jwks_file_replaced_by_one_of_the_same_size_and_times_is_another_version(tmp_path: Path) -> None:
    """The file's version was its modification time and size: a file of the same size renamed over
    it with the old times (or written within one tick) was not read, its old keys kept."""
    import os

    old, new = RsaKeys(), RsaKeys()
    old.add("k1")
    new.add("k2")
    path, replacement = tmp_path / "jwks.json", tmp_path / "jwks.json.new"
    path.write_text(json.dumps(old.jwks()))
    replacement.write_text(json.dumps(new.jwks()))
    before = path.stat()
    assert replacement.stat().st_size == before.st_size
    source = JwksFile(path)
    verifier = _verifier(source, Clock(time.time()))
    token = old.sign(claims("alice"), "k1")
    assert (await verifier.verify(token))["sub"] == "alice"
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, path)
    assert await _refused(verifier, token) == "TOKEN_KEY_UNKNOWN"
    assert (await verifier.verify(new.sign(claims("alice"), "k2")))["sub"] == "alice"


def _refused(verifier: TokenVerifier, token: str) -> Any:
    async def refusal() -> str:
        with pytest.raises(Unauthenticated) as refused:
            await verifier.verify(token)
        return refused.value.reason
    return refusal()


async def test_a_jwks_file_changed_to_no_usable_key_or_deleted_revokes_every_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file rewritten to {"keys": []}, or to keys none of which can be used, was refused as no
    JWKS and the keys read before stayed trusted for ever (a deleted file too): it revokes them,
    also a token remembered under them. Only a file that is no JWKS document keeps them."""
    keys = RsaKeys()
    keys.add("k1")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(keys.jwks()))
    source = JwksFile(path)
    verifier = _verifier(source, Clock(time.time()))
    token = keys.sign(claims("alice"), "k1")
    weak = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()))
    unusable = {"keys": [{**keys.jwks()["keys"][0], "alg": "none"}, {"kty": "RSA", "kid": "k1", "n": "AQAB", "e": "AQAB"}, {**weak, "kid": "k1"}]}
    for revoking in ({"keys": []}, unusable, None):
        path.write_text(json.dumps(keys.jwks()))
        assert (await verifier.verify(token))["sub"] == "alice"  # remembered from here
        before = source.version()
        with caplog.at_level("WARNING"):
            if revoking is None:
                path.unlink()
            else:
                path.write_text(json.dumps(revoking))
            for _ in range(2):
                assert await _refused(verifier, token) == "TOKEN_KEY_UNKNOWN", revoking
        assert source.version() != before
        assert len([r for r in caplog.records if "every key" in r.getMessage()]) == 1, caplog.text  # said once
        assert ("The RSA key is 1024 bits long" in caplog.text and "that key is not used" in caplog.text) == (revoking is unusable)
        caplog.clear()
    path.write_text("{\"keys\": [")  # half written: no JWKS document, the keys in hand stay
    assert await _refused(verifier, token) == "TOKEN_KEY_UNKNOWN"
    path.write_text(json.dumps(keys.jwks()))
    assert (await verifier.verify(token))["sub"] == "alice"
    path.write_text("{\"keys\": [")
    assert (await verifier.verify(token))["sub"] == "alice"


async def test_a_jwks_url_serving_no_usable_key_revokes_every_key(caplog: pytest.LogCaptureFixture) -> None:
    """A fetch of {"keys": []}, or of keys none of which can be used, counted as a failed fetch: the
    keys fetched before stayed trusted for ever. It revokes them, whichever fetch brings it."""
    keys = RsaKeys()
    keys.add("k1")
    keys.add("k2")
    clock = Clock(time.time())
    served: dict[str, Any] = {}
    unusable = {"keys": [{**keys.jwks()["keys"][0], "alg": "none"}, {"kty": "RSA", "kid": "k1", "n": "AQAB", "e": "AQAB"}]}
    with get_json_server(lambda: served["doc"]) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=0, clock=clock)
        verifier = _verifier(source, clock, remember_s=300)
        try:
            token = keys.sign(claims("alice"), "k1")
            for revoking in ({"keys": []}, unusable):
                for fetched_by in ("age", "unknown kid"):
                    served["doc"] = {"keys": keys.jwks()["keys"][:1]}
                    assert (await verifier.verify(token))["sub"] == "alice"  # fetched (k1 unknown after a revocation), remembered
                    served["doc"] = revoking
                    with caplog.at_level("WARNING"):
                        if fetched_by == "age":
                            clock.now += 300
                            await verifier.verify(token)  # the keys in hand answer while they are fetched again
                            assert source._background is not None
                            await source._background
                        else:
                            assert await _refused(verifier, keys.sign(claims("bob"), "k2")) == "TOKEN_KEY_UNKNOWN"
                    assert await _refused(verifier, token) == "TOKEN_KEY_UNKNOWN", (revoking, fetched_by)
                    assert "holds no usable key" in caplog.text and "every key is revoked" in caplog.text
                    caplog.clear()
        finally:
            await verifier.close()


async def test_a_token_without_exp_is_refused_remembered_or_not() -> None:
    """Without exp a token would be good for ever; and remembering one read its exp (KeyError:
    INTERNAL) had the verification not required it."""
    keys, clock = CountingKeys(), Clock(time.time())
    for remember_s in (0.0, 300.0):
        verifier = _verifier(keys, clock, remember_s=remember_s)
        for _ in range(2):
            with pytest.raises(Unauthenticated) as refused:
                await verifier.verify(hs256(claims("alice", "SUPER_ADMIN", exp=None)))
            assert refused.value.reason == "TOKEN_CLAIM_MISSING"


def test_a_shared_secret_has_one_version() -> None:
    secret = SharedSecret(SECRET)
    assert secret.version() == secret.version()


async def test_an_exp_no_float_holds_is_verified_every_time() -> None:
    keys, clock = CountingKeys(), Clock(time.time())
    verifier = _verifier(keys, clock)
    token = hs256(claims("alice", exp=10**400))
    for _ in range(2):
        assert (await verifier.verify(token))["sub"] == "alice"
    assert keys.uses == 2


class _Idp:
    """A JWKS endpoint whose keys the test replaces, and whose answers it can hold back."""

    def __init__(self, keys: RsaKeys) -> None:
        self.keys, self.released = keys, threading.Event()
        self.released.set()

    def __call__(self) -> Any:
        self.released.wait(30)
        return self.keys.jwks()


async def test_a_jwks_url_is_another_version_only_when_a_fetch_brings_other_keys() -> None:
    keys = RsaKeys()
    keys.add("k1")
    clock = Clock(time.time())
    with get_json_server(_Idp(keys)) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=0, clock=clock)
        try:
            assert source.version() is None  # nothing fetched yet
            await source.keys_for("k1", "RS256")
            first = source.version()
            assert first is not None
            for i in range(3):  # unknown kids fetch again, the same keys come back
                with pytest.raises(Unauthenticated):
                    await source.keys_for(f"forged-{i}", "RS256")
            assert source.version() == first and len(idp.requests) == 4
            keys.add("k2")
            await source.keys_for("k2", "RS256")
            assert source.version() not in (None, first)
            clock.now += 300
            assert source.version() is None  # older than cache_s: only a fetch may be trusted
        finally:
            await source.close()


async def test_a_jwks_document_above_the_size_limit_is_not_read() -> None:
    """Read up to MAX_RESPONSE_BYTES: past it the keys cannot be fetched (UNAVAILABLE until a fetch
    succeeds), and the server's memory is not the limit."""
    keys = RsaKeys()
    keys.add("k1")
    document = {**keys.jwks(), "padding": "x" * MAX_RESPONSE_BYTES}
    with get_json_server(lambda: document) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=0)
        try:
            with pytest.raises(Unavailable):
                await source.keys_for("k1", "RS256")
            document.pop("padding")
            assert await source.keys_for("k1", "RS256")
        finally:
            await source.close()


async def test_a_token_whose_key_the_idp_dropped_is_refused_once_the_keys_age_or_a_fetch_brings_the_new_ones() -> None:
    keys = RsaKeys()
    keys.add("k1")
    clock = Clock(time.time())
    idp_keys = _Idp(keys)
    with get_json_server(idp_keys) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=0, clock=clock)
        verifier = _verifier(source, clock, remember_s=300)
        try:
            old = keys.sign(claims("alice"), "k1")
            await verifier.verify(old)  # keys fetched at 0
            clock.now += 299
            await verifier.verify(old)  # still the keys of 0, still remembered
            keys.keys.pop("k1")
            keys.add("k2")
            clock.now += 2  # the keys are older than cache_s: what they verified is not trusted unchecked,
            assert (await verifier.verify(old))["sub"] == "alice"  # but checked with them while they are fetched again
            assert source._background is not None
            await source._background
            with pytest.raises(Unauthenticated) as refused:
                await verifier.verify(old)
            assert refused.value.reason == "TOKEN_KEY_UNKNOWN"

            # Verifications made while a fetch is on its way use the keys in hand and are remembered
            # under their version: the fetch that brings other keys ends them.
            bob, dave = keys.sign(claims("bob"), "k2"), keys.sign(claims("dave"), "k2")
            await verifier.verify(bob)
            keys.keys.pop("k2")
            keys.add("k4")
            idp_keys.released.clear()
            asked = len(idp.requests)
            fetching = asyncio.create_task(verifier.verify(keys.sign(claims("carol"), "k4")))  # an unknown kid: fetches
            while len(idp.requests) == asked:
                await asyncio.sleep(0.01)
            assert (await verifier.verify(bob))["sub"] == "bob"  # remembered; the fetch has not answered
            assert (await verifier.verify(dave))["sub"] == "dave"  # verified now, with the keys in hand
            idp_keys.released.set()
            assert (await fetching)["sub"] == "carol"
            for token in (bob, dave):
                with pytest.raises(Unauthenticated) as refused:
                    await verifier.verify(token)
                assert refused.value.reason == "TOKEN_KEY_UNKNOWN"
        finally:
            idp_keys.released.set()
            await verifier.close()


async def test_a_failed_fetch_is_logged_without_the_urls_password(caplog: pytest.LogCaptureFixture) -> None:
    """httpx's text for a status quotes the whole URL, with its user and password."""
    with json_server(lambda path, body: (200, {})) as idp:  # answers GET with 501
        source = JwksUrl(idp.url.replace("http://", "http://svc:S3cretPassw0rd@") + "/jwks", cache_s=300, min_refresh_s=0)
        try:
            with caplog.at_level("WARNING"), pytest.raises(Unavailable):
                await source.keys_for("k1", "RS256")
        finally:
            await source.close()
    assert "cannot fetch the JWKS" in caplog.text and "HTTP 501" in caplog.text and "S3cret" not in caplog.text


async def test_a_token_with_a_deeply_nested_claim_is_verified_and_weighed_not_an_internal_error() -> None:
    """Weighing its claims to remember it recursed: nested 480 deep, RecursionError made the call INTERNAL."""

    keys, clock = CountingKeys(), Clock(time.time())
    verifier = _verifier(keys, clock)
    depth = 900
    payload = json.dumps(claims("alice")).encode()[:-1] + b', "profile": ' + b"[" * depth + b'"x"' + b"]" * depth + b"}"
    token = jwt.api_jws.encode(payload, SECRET, "HS256")
    for _ in range(2):
        verified = await verifier.verify(token)
        assert verified["sub"] == "alice"
    assert keys.uses == 1  # remembered, weighed with the string at the bottom of the claim
    assert held_bytes(verified["profile"]) == held_bytes("x") and verifier._held == held_bytes(token) + held_bytes(verified)
