"""The JWKS URL key source: cached, fetched again for an unknown kid, rate-limited, kept on failure."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from retrieval_server.api.tokens import JwksUrl
from retrieval_server.domain import Unauthenticated, Unavailable
from tests.support.clock import Clock
from tests.support.http_servers import get_json_server
from tests.support.tokens import HeldJwks, RsaKeys


async def test_unknown_kids_cannot_hammer_the_identity_provider() -> None:
    keys = RsaKeys()
    keys.add("k1")
    clock = Clock()
    with get_json_server(keys.jwks) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=30, clock=clock)
        try:
            assert await source.keys_for("k1", "RS256")
            for i in range(50):  # a flood of forged kids within the refresh interval
                with pytest.raises(Unauthenticated):
                    await source.keys_for(f"forged-{i}", "RS256")
            assert len(idp.requests) == 1
            clock.now = 31  # after the interval, an unknown kid may fetch again: once
            keys.add("k2")
            assert await source.keys_for("k2", "RS256")
            assert len(idp.requests) == 2
            clock.now = 400  # past the cache lifetime the next use fetches, in the background
            await source.keys_for("k1", "RS256")
            assert source._background is not None
            await source._background
            assert len(idp.requests) == 3
        finally:
            await source.close()


async def test_fetch_failures_keep_the_known_keys_and_say_unavailable_without_any() -> None:
    keys = RsaKeys()
    keys.add("k1")
    clock = Clock()
    state: dict[str, Any] = {"up": True}

    def body() -> Any:
        return keys.jwks() if state["up"] else state.get("answer", "not a jwks")

    with get_json_server(body) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=10, min_refresh_s=0, clock=clock)
        try:
            await source.keys_for("k1", "RS256")
            state["up"] = False
            clock.now = 20
            for answer, now in (("not a jwks", 20), (b"[" * 100_000 + b"]" * 100_000, 40)):  # the second deeper than the parser goes
                state["answer"], clock.now = answer, now
                assert await source.keys_for("k1", "RS256")
                assert source._background is not None
                await source._background  # failed
                assert await source.keys_for("k1", "RS256")  # stale but known keys serve
        finally:
            await source.close()
    # Never fetched, every call is UNAVAILABLE, also while a failed fetch holds back the next one:
    # no token can be checked yet, and a caller told its token is bad would drop it.
    down = JwksUrl("http://127.0.0.1:9/jwks", cache_s=10, min_refresh_s=30, clock=clock)
    try:
        for _ in range(3):
            with pytest.raises(Unavailable):
                await down.keys_for("k1", "RS256")
    finally:
        await down.close()


async def test_keys_past_their_cache_lifetime_answer_while_they_are_fetched_again() -> None:
    """An identity provider that hangs held the first call after each cache period for the whole
    fetch timeout (5 s), with a valid token: only a call without any keys, or naming an unknown
    kid, waits for a fetch."""
    import asyncio
    import threading

    keys = RsaKeys()
    keys.add("k1")
    clock = Clock()
    hold, asked, released = threading.Event(), threading.Event(), threading.Event()

    def body() -> Any:
        if hold.is_set():
            asked.set()
            released.wait()
        return keys.jwks()

    with get_json_server(body) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=30, clock=clock)
        call: asyncio.Future[Any] | None = None
        try:
            first = await source.keys_for("k1", "RS256")
            hold.set()
            keys.add("k2")
            clock.now = 301
            call = asyncio.ensure_future(source.keys_for("k1", "RS256"))
            fetching = asyncio.ensure_future(asyncio.to_thread(asked.wait))
            done, _ = await asyncio.wait({call, fetching}, return_when=asyncio.FIRST_COMPLETED)
            assert call in done, "the call waited for the identity provider"
            assert call.result() == first
            await fetching  # the fetch is under way, held by the identity provider
            assert await source.keys_for("k1", "RS256") == first  # answered too, without a second fetch
            unknown = asyncio.ensure_future(source.keys_for("k2", "RS256"))  # waits for the fetch under way
            released.set()
            assert await unknown
            assert len(idp.requests) == 2
        finally:
            released.set()
            if call is not None:
                await call
            await source.close()


async def test_keys_past_their_cache_lifetime_are_fetched_again_even_within_min_refresh_s() -> None:
    """With JWT_JWKS_CACHE_S below JWT_JWKS_MIN_REFRESH_S the fetch after the cache lifetime was
    rate-limited too: a key the identity provider dropped was trusted for MIN_REFRESH_S, not CACHE_S."""
    from retrieval_server.api.tokens import TokenVerifier
    from tests.support.tokens import AUDIENCE, ISSUER, claims

    keys = RsaKeys()
    keys.add("k1")
    keys.add("k2")
    clock = Clock()
    served = {"doc": keys.jwks()}
    with get_json_server(lambda: served["doc"]) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=1, min_refresh_s=4, clock=clock)
        verifier = TokenVerifier(source, ("RS256",), issuer=ISSUER, audience=AUDIENCE, leeway_s=30, remember_s=1, monotonic=clock)
        try:
            token = keys.sign(claims("alice"), "k1")
            assert (await verifier.verify(token))["sub"] == "alice"
            served["doc"] = {"keys": [k for k in keys.jwks()["keys"] if k["kid"] == "k2"]}  # the identity provider drops k1
            clock.now = 1.5
            assert (await verifier.verify(token))["sub"] == "alice"  # the keys in hand answer while they are fetched again
            assert source._background is not None
            await source._background
            assert len(idp.requests) == 2
            with pytest.raises(Unauthenticated) as refused:
                await verifier.verify(token)
            assert refused.value.reason == "TOKEN_KEY_UNKNOWN"
            assert len(idp.requests) == 2  # the unknown kid is still held to min_refresh_s
        finally:
            await verifier.close()


async def test_claims_name_groups_and_roles_as_written(tmp_path: Path) -> None:
    """A string claim is one name (the group "Sales EMEA" is not the groups "Sales" and "EMEA"),
    and without a role map only the role names themselves, as written, are roles."""
    from retrieval_server.api.auth import authenticator_for
    from retrieval_server.config import load_settings
    from retrieval_server.domain import Role
    from retrieval_server.identifiers import MAX_GROUPS
    from tests.support.tokens import AUDIENCE, SECRET, claims, hs256

    auth = authenticator_for(load_settings(data_dir=tmp_path, auth_mode="jwt", jwt_secret=SECRET, jwt_groups_claim="groups", jwt_audience=AUDIENCE))

    async def identify(**extra: Any) -> Any:
        token = hs256(claims("dave", **extra))
        return await auth.identify(lambda: {"authorization": f"Bearer {token}"}, None, True)  # type: ignore[arg-type]

    try:
        for groups in ("Sales EMEA", ["Sales EMEA"]):
            assert (await identify(groups=groups)).principals == ("dave", "group:Sales EMEA")
        assert (await identify(groups="Sales,EMEA")).principals == ("dave", "group:Sales,EMEA")
        for none in ("", " "):  # how some mappers say "no groups"
            assert (await identify(groups=none)).principals == ("dave",)
        for written, role in (("ADMIN", Role.ADMIN), ("admin", Role.USER), ("Not ADMIN", Role.USER), (["USER", "SUPER_ADMIN"], Role.SUPER_ADMIN)):
            assert (await identify(role=written)).role is role
        # Every read names each group: a token of more than MAX_GROUPS is refused, not read.
        assert len((await identify(groups=[f"g{i}" for i in range(MAX_GROUPS)])).principals) == MAX_GROUPS + 1
        with pytest.raises(Unauthenticated, match=f"names {MAX_GROUPS + 1} groups; at most {MAX_GROUPS} are read") as refused:
            await identify(groups=[f"g{i}" for i in range(MAX_GROUPS + 1)])
        assert refused.value.reason == "TOKEN_CLAIM_INVALID"
    finally:
        await auth.close()


async def test_a_groups_or_role_claim_of_another_type_is_refused_not_read_as_none(tmp_path: Path) -> None:
    """A groups claim that was an object was read as no groups, and a number among its names was
    dropped: the caller silently lost every document granted to those groups."""
    from retrieval_server.api.auth import authenticator_for
    from retrieval_server.config import load_settings
    from tests.support.tokens import AUDIENCE, SECRET, claims

    auth = authenticator_for(load_settings(data_dir=tmp_path, auth_mode="jwt", jwt_secret=SECRET, jwt_groups_claim="groups", jwt_audience=AUDIENCE))
    try:
        assert (await _identify(auth, {**claims("dave"), "groups": None})).principals == ("dave",)  # null: no groups, as absent
        for claim, value, says in (("groups", {"eng": True}, "got dict"), ("groups", ["eng", 7], "it holds a int"),
                                   ("groups", ["eng", None], "it holds a NoneType"), ("groups", 7, "got int"), ("groups", True, "got bool"),
                                   ("role", {"name": "ADMIN"}, "got dict"), ("role", ["ADMIN", ["USER"]], "it holds a list")):
            with pytest.raises(Unauthenticated, match=f"the token's {claim} claim must be a string or a list of strings \\({says}\\)") as refused:
                await _identify(auth, claims("dave", **{claim: value}))
            assert refused.value.reason == "TOKEN_CLAIM_INVALID", (claim, value)
    finally:
        await auth.close()


async def _identify(auth: Any, payload: dict[str, Any]) -> Any:
    from tests.support.tokens import hs256

    token = hs256(payload)
    return await auth.identify(lambda: {"authorization": f"Bearer {token}"}, None, True)


async def test_a_user_or_group_is_taken_as_the_token_names_it_never_trimmed_into_another(tmp_path: Path) -> None:
    """"alice\u200b" is another account of the identity provider than "alice": trimmed, it read
    alice's documents. So is the group " hr " another than "hr"."""
    from retrieval_server.api.auth import authenticator_for
    from retrieval_server.config import load_settings
    from tests.support.tokens import AUDIENCE, SECRET, claims

    auth = authenticator_for(load_settings(data_dir=tmp_path, auth_mode="jwt", jwt_secret=SECRET, jwt_audience=AUDIENCE,
                                           jwt_groups_claim="groups", jwt_user_claim="preferred_username"))
    try:
        assert (await _identify(auth, claims("x", preferred_username="alice", groups=["hr"]))).principals == ("alice", "group:hr")
        for user, groups in (("alice\u200b", []), ("\ufeffalice", []), ("alice\xa0", []), (" alice", []), ("Zu\u0308rich", []),
                             ("mallory", ["hr\u200b"]), ("mallory", [" hr "])):
            with pytest.raises(Unauthenticated, match="must be sent as it is stored") as refused:
                await _identify(auth, claims("x", preferred_username=user, groups=groups))
            assert refused.value.reason == "TOKEN_CLAIM_INVALID"
        # A claim that is there but no string is invalid, not missing, and says what it holds.
        for value, kind in ((12345, "int"), (["alice"], "list")):
            with pytest.raises(Unauthenticated, match=f"preferred_username claim must be a string \\(got {kind}\\)") as refused:
                await _identify(auth, claims("x", preferred_username=value))
            assert refused.value.reason == "TOKEN_CLAIM_INVALID"
        with pytest.raises(Unauthenticated, match="no 'preferred_username' claim") as refused:
            await _identify(auth, claims("x"))
        assert refused.value.reason == "TOKEN_CLAIM_MISSING"
        with pytest.raises(Unauthenticated, match="sub claim must be a string") as refused:
            await _identify(auth, {**claims("x", preferred_username="alice"), "sub": 12345})
        assert refused.value.reason == "TOKEN_CLAIM_INVALID"
    finally:
        await auth.close()


async def test_without_an_audience_set_a_token_meant_for_another_service_is_refused(tmp_path: Path) -> None:
    """One realm of an identity provider mints tokens for every app in it: one naming another
    audience is not for us, even when RETRIEVAL_JWT_AUDIENCE is unset."""
    from retrieval_server.api.auth import authenticator_for
    from retrieval_server.config import load_settings
    from tests.support.tokens import SECRET, claims

    auth = authenticator_for(load_settings(data_dir=tmp_path, auth_mode="jwt", jwt_secret=SECRET))
    try:
        with pytest.raises(Unauthenticated) as refused:
            await _identify(auth, claims("alice", aud="billing-service"))
        assert refused.value.reason == "TOKEN_AUDIENCE"
        assert (await _identify(auth, claims("alice", aud=None))).principals == ("alice",)
    finally:
        await auth.close()


def _jwk(public: Any, kid: str, **fields: str) -> dict[str, Any]:
    import json

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    kind = jwt.algorithms.RSAAlgorithm if isinstance(public, rsa.RSAPublicKey) else jwt.algorithms.ECAlgorithm
    return {**json.loads(kind.to_jwk(public)), "kid": kid, **fields}


async def test_a_kid_names_every_key_it_is_the_kid_of_and_a_key_verifies_only_its_use_and_algorithm(tmp_path: Path) -> None:
    """The first key of a kid was the only one (RFC 7517 4.5 lets an RSA and an EC key share it:
    the EC key's tokens were refused), and its alg and use were not read: a key published for RS256
    verified PS256 tokens, and an encryption key verified signatures."""
    import json
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    from retrieval_server.api.tokens import JwksFile, TokenVerifier

    rsa_key, ec_key, other_rsa, enc_key = (rsa.generate_private_key(public_exponent=65537, key_size=2048), ec.generate_private_key(ec.SECP256R1()),
                                           rsa.generate_private_key(public_exponent=65537, key_size=2048),
                                           rsa.generate_private_key(public_exponent=65537, key_size=2048))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [_jwk(rsa_key.public_key(), "main", use="sig", alg="RS256"), _jwk(ec_key.public_key(), "main", use="sig"),
                                         _jwk(other_rsa.public_key(), "main"), _jwk(enc_key.public_key(), "enc-1", use="enc")]}))
    verifier = TokenVerifier(JwksFile(path), ("RS256", "PS256", "ES256"), issuer=None, audience=None, leeway_s=30)
    payload = {"sub": "alice", "exp": int(time.time()) + 600}
    for key, alg in ((rsa_key, "RS256"), (ec_key, "ES256"), (other_rsa, "RS256"), (other_rsa, "PS256")):  # no alg stated: RS* and PS*
        assert (await verifier.verify(jwt.encode(payload, key, alg, headers={"kid": "main"})))["sub"] == "alice", alg
    for key, alg, kid, reason in ((rsa_key, "PS256", "main", "TOKEN_SIGNATURE"),  # only other_rsa may verify PS256 under main
                                  (enc_key, "RS256", "enc-1", "TOKEN_ALGORITHM"), (enc_key, "PS256", "enc-1", "TOKEN_ALGORITHM")):
        with pytest.raises(Unauthenticated) as refused:
            await verifier.verify(jwt.encode(payload, key, alg, headers={"kid": kid}))
        assert refused.value.reason == reason, (alg, kid)
    await verifier.close()


@pytest.mark.filterwarnings("ignore:The RSA key is 1024 bits long")  # PyJWT's, signing the test's tokens with the weak key
async def test_an_rsa_key_under_2048_bits_verifies_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """PyJWT only warned of a 1,024-bit key, and its tokens were accepted: a JWKS file holding one is
    refused at start-up, a fetched JWKS's is left out (its other keys still verify), and a weak key
    reaching PyJWT is refused there too."""
    import json
    import time

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    from retrieval_server.api.tokens import TokenVerifier
    from retrieval_server.config import ConfigError, load_settings

    weak, strong = rsa.generate_private_key(public_exponent=65537, key_size=1024), rsa.generate_private_key(public_exponent=65537, key_size=2048)
    document = {"keys": [_jwk(weak.public_key(), "weak"), _jwk(strong.public_key(), "strong")]}
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match=f"RETRIEVAL_JWT_JWKS_FILE '{path}' cannot be read as a JWKS: key 'weak': The RSA key is 1024 bits long"):
        load_settings(auth_mode="jwt", jwt_jwks_file=path)

    payload = {"sub": "alice", "exp": int(time.time()) + 600}
    with get_json_server(lambda: document) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=30)
        verifier = TokenVerifier(source, ("RS256",), issuer=None, audience=None, leeway_s=30)
        try:
            with caplog.at_level("WARNING"):
                assert (await verifier.verify(jwt.encode(payload, strong, "RS256", headers={"kid": "strong"})))["sub"] == "alice"
                with pytest.raises(Unauthenticated) as refused:
                    await verifier.verify(jwt.encode(payload, weak, "RS256", headers={"kid": "weak"}))
        finally:
            await verifier.close()
    assert refused.value.reason == "TOKEN_KEY_UNKNOWN"
    assert "key 'weak': The RSA key is 1024 bits long" in caplog.text and "that key is not used" in caplog.text

    class WeakKey:
        async def keys_for(self, kid: str | None, alg: str) -> tuple[Any, ...]:
            return (weak.public_key(),)

        def version(self) -> None:
            return None

        async def close(self) -> None:
            return None

    with pytest.raises(Unauthenticated):
        await TokenVerifier(WeakKey(), ("RS256",), issuer=None, audience=None, leeway_s=30).verify(jwt.encode(payload, weak, "RS256"))


async def test_a_jwk_pyjwt_cannot_build_is_skipped_like_any_other_unusable_key(tmp_path: Path) -> None:
    """PyJWK raises NotImplementedError for a JWK of "alg": "none", which no handler caught: with a
    JWKS file every call failed INTERNAL, a fetched JWKS was thrown away whole (the rotated key it
    brought never learned), and the start-up failed with a bare exception naming no setting."""
    import json

    import jwt

    from retrieval_server.api.tokens import JwksFile, TokenVerifier
    from retrieval_server.config import ConfigError, load_settings
    from tests.support.tokens import AUDIENCE, ISSUER, claims

    keys = RsaKeys()
    keys.add("k1")
    keys.add("k2")
    good = keys.jwks()["keys"]
    odd = {**good[1], "kid": "legacy", "alg": "none"}
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [*good, odd]}))
    assert load_settings(data_dir=tmp_path, auth_mode="jwt", jwt_jwks_file=path).jwt_jwks_file == path
    path.write_text(json.dumps({"keys": [odd]}))
    with pytest.raises(ConfigError, match=f"RETRIEVAL_JWT_JWKS_FILE '{path}' cannot be read as a JWKS: .*no key in it is one PyJWT can use"):
        load_settings(data_dir=tmp_path, auth_mode="jwt", jwt_jwks_file=path)

    path.write_text(json.dumps({"keys": good[:1]}))
    verifier = TokenVerifier(JwksFile(path), ("RS256",), issuer=ISSUER, audience=AUDIENCE, leeway_s=30)
    assert (await verifier.verify(keys.sign(claims("alice"), "k1")))["sub"] == "alice"
    path.write_text(json.dumps({"keys": [*good, odd]}))  # another size: read again
    assert (await verifier.verify(keys.sign(claims("bob"), "k2")))["sub"] == "bob"
    with pytest.raises(Unauthenticated) as refused:
        await verifier.verify(jwt.encode(claims("carol"), keys.keys["k2"], "RS256", headers={"kid": "legacy"}))  # the odd key verifies nothing
    assert refused.value.reason == "TOKEN_KEY_UNKNOWN"
    await verifier.close()

    served = {"keys": good[:1]}
    with get_json_server(lambda: served) as idp:
        verifier = TokenVerifier(JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=0), ("RS256",), issuer=ISSUER, audience=AUDIENCE, leeway_s=30)
        try:
            assert (await verifier.verify(keys.sign(claims("alice"), "k1")))["sub"] == "alice"
            served["keys"] = [*good, odd]
            assert (await verifier.verify(keys.sign(claims("bob"), "k2")))["sub"] == "bob"  # an unknown kid: fetched, and learned
        finally:
            await verifier.close()


async def test_a_caller_that_gives_up_does_not_stop_the_fetch_others_wait_for() -> None:
    """The first fetch, and the one an unknown kid asks for, ran in the call that asked: its caller's
    deadline or cancel cancelled the fetch, which had already counted against JWT_JWKS_MIN_REFRESH_S.
    Every call was then UNAVAILABLE (no keys yet), or its new key TOKEN_KEY_UNKNOWN, for that long,
    and an identity provider slower than the callers' deadlines was never fetched from at all."""
    import asyncio
    import threading

    keys = RsaKeys()
    keys.add("k1")
    clock = Clock()
    asked, released = threading.Event(), threading.Event()

    def body() -> Any:
        asked.set()
        released.wait(30)
        return keys.jwks()

    async def given_up(kid: str) -> None:
        """A call asking for ``kid`` cancelled while the identity provider holds the fetch it waits for."""
        asked.clear()
        released.clear()
        call = asyncio.ensure_future(source.keys_for(kid, "RS256"))
        await asyncio.to_thread(asked.wait, 30)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        released.set()

    with get_json_server(body) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=30, clock=clock)
        try:
            await given_up("k1")  # the first fetch
            assert await source.keys_for("k1", "RS256")  # the fetch went on: its keys answer, not UNAVAILABLE
            assert len(idp.requests) == 1
            keys.add("k2")  # a rotation
            clock.now = 31
            await given_up("k2")
            assert await source.keys_for("k2", "RS256")  # not TOKEN_KEY_UNKNOWN until min_refresh_s passes again
            assert len(idp.requests) == 2
        finally:
            released.set()
            await source.close()


async def test_health_fetches_the_keys_none_are_held_at_most_as_often_as_a_call_would_and_never_once_some_are() -> None:
    """Health said a JWKS URL's keys were fine when none could be had (every call with a token
    UNAVAILABLE). With none held, it asks as a call would (JWT_JWKS_MIN_REFRESH_S between fetches),
    and says why there are none; with keys held it fetches nothing, and says a refresh failed."""
    keys = RsaKeys()
    keys.add("k1")
    clock = Clock()
    answer: dict[str, Any] = {"body": b"<html>maintenance</html>"}
    with get_json_server(lambda: answer["body"]) as idp:
        source = JwksUrl(f"{idp.url}/jwks/secret-path", cache_s=300, min_refresh_s=30, clock=clock)
        try:
            held, why = await source.health(30)
            assert not held and why is not None and "cannot be fetched" in why and "no JWKS document" in why
            assert "secret-path" not in why and "127.0.0.1" not in why  # Health answers callers without credentials
            assert len(idp.requests) == 1
            assert await source.health(30) == (held, why)  # no second fetch within the rate limit
            assert len(idp.requests) == 1
            answer["body"] = keys.jwks()
            clock.now = 31
            assert await source.health(30) == (True, None)
            assert len(idp.requests) == 2
            # Held, then a refresh that fails (a rotated key's kid asked for): the keys held still verify.
            answer["body"] = b"<html>maintenance</html>"
            clock.now = 62
            with pytest.raises(Unauthenticated):
                await source.keys_for("k2", "RS256")
            assert len(idp.requests) == 3
            held, why = await source.health(30)
            assert held and why is not None and "refresh failed" in why and "no JWKS document" in why
            assert len(idp.requests) == 3  # keys held: Health fetches nothing
            keys.add("k2")
            answer["body"] = keys.jwks()
            clock.now = 93
            assert await source.keys_for("k1", "RS256") and len(idp.requests) == 3  # not asked by a known kid
            assert await source.keys_for("k2", "RS256") and len(idp.requests) == 4
            assert await source.health(30) == (True, None)  # the refresh that failed is behind
        finally:
            await source.close()


async def test_health_waits_for_the_keys_no_longer_than_its_time_and_leaves_the_fetch_to_finish() -> None:
    """A cold server's Health asks for the keys (its readiness then says whether they can be had),
    within the time its caller allows, as the other components' probes; the fetch it started goes on
    for the calls after it."""
    import asyncio

    keys = RsaKeys()
    keys.add("k1")
    held = HeldJwks(keys)
    asked, released = held.asked, held.released

    with get_json_server(held) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=30, clock=Clock())
        try:
            ok, why = await source.health(0.05)  # the probe's own bound: the identity provider holds its answer
            assert not ok and why is not None and "not answered" in why
            await asyncio.to_thread(asked.wait)  # the fetch it started goes on
            released.set()
            assert await source.health(30) == (True, None)  # the same fetch, awaited: no second one
            assert len(idp.requests) == 1
        finally:
            released.set()
            await source.close()


async def test_health_waits_for_the_fetch_in_flight_and_queues_none_behind_it() -> None:
    """Each Health probe during a slow first fetch queued a fetch of its own behind it: once the
    keys came, the first queued fetched them again when the slow one had outlasted
    JWT_JWKS_MIN_REFRESH_S, and so on, one after another for as many probes as there had been."""
    import asyncio

    keys = RsaKeys()
    keys.add("k1")
    held = HeldJwks(keys)
    asked, released = held.asked, held.released

    clock = Clock()
    with get_json_server(held) as idp:
        source = JwksUrl(f"{idp.url}/jwks", cache_s=300, min_refresh_s=30, clock=clock)
        try:
            for _ in range(3):
                held_now, _why = await source.health(0)  # each probe's bound passes before the identity provider answers
                assert not held_now
            await asyncio.to_thread(asked.wait)
            clock.now = 31  # the fetch in flight outlasts min_refresh_s
            released.set()
            assert await source.health(30) == (True, None)
            assert await source.keys_for("k1", "RS256")  # held: no fetch
            assert len(idp.requests) == 1
        finally:
            released.set()
            await source.close()
