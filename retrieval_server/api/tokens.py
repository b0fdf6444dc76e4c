"""Verifying bearer tokens (JWT) with PyJWT: signature, algorithm allow-list, issuer, audience, time.

Keys come from a shared secret (HMAC), a JWKS file, or a JWKS URL fetched over HTTP: cached for
``cache_s``, then fetched again in the background while the keys in hand still answer (an identity
provider that hangs held one call per cache period for the whole fetch timeout), fetched again,
waited for, when a token names a key id the cache does not hold (at most once per
``min_refresh_s``, so a flood of forged kids cannot hammer the identity provider), and kept
when a fetch fails (a JWKS without a usable key is no failure: it revokes them all). Only the first fetch and an unknown kid wait for one, and a call that gives up waiting (its deadline, a cancel) leaves that fetch to finish for the calls after it. Every failure is an :class:`Unauthenticated` with a stable reason and a
message that helps the caller without saying anything about the keys.

A token that verified is remembered (:class:`TokenVerifier`): verifying one costs tens of
microseconds (PyJWT on this project's 2-core machine: 41 µs for RS256, 68 for ES256, 23 for
HS256, plus 20 to read the header), more than a third of a cached answer's own CPU, and a caller
sends the same token with every call until it expires. It is accepted again without its
signature checked only while it has not expired (``exp`` plus the leeway), for at most
``remember_s`` after it was verified (the server passes RETRIEVAL_JWT_JWKS_CACHE_S), and only
while the key source says its keys are the ones the token was verified with and may still be
used without a fetch (:meth:`KeySource.version`): a JWKS file that changed, a fetch that brought
other keys, or fetched keys older than their cache lifetime make it verified again. What is
remembered is bounded by count and by bytes (a token of 1,000 groups weighs about 650 KB).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import httpx
import jwt

from retrieval_server.api.identity import REMEMBERED_BYTES, held_bytes
from retrieval_server.backends.http_body import ResponseRefused, failure_text, request_bounded, without_userinfo
from retrieval_server.domain import Unauthenticated, Unavailable

log = logging.getLogger(__name__)

_REASONS: tuple[tuple[type[Exception], str, str], ...] = (
    (jwt.ExpiredSignatureError, "TOKEN_EXPIRED", "the token has expired"),
    (jwt.ImmatureSignatureError, "TOKEN_NOT_YET_VALID", "the token is not valid yet (nbf or iat in the future)"),
    (jwt.InvalidAudienceError, "TOKEN_AUDIENCE", "the token is not meant for this service (aud)"),
    (jwt.InvalidIssuerError, "TOKEN_ISSUER", "the token was not issued by the trusted issuer (iss)"),
    (jwt.MissingRequiredClaimError, "TOKEN_CLAIM_MISSING", "the token lacks a required claim"),
    (jwt.InvalidSignatureError, "TOKEN_SIGNATURE", "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, "TOKEN_ALGORITHM", "the token's algorithm is not accepted"),
    (jwt.exceptions.InvalidSubjectError, "TOKEN_CLAIM_INVALID", "the token's sub claim must be a string"),
    (jwt.exceptions.InvalidJTIError, "TOKEN_CLAIM_INVALID", "the token's jti claim must be a string"),
    (jwt.DecodeError, "TOKEN_MALFORMED", "the token is not a well-formed JWT"),
    (jwt.InvalidTokenError, "TOKEN_INVALID", "the token is not valid"),
)


def _refusal(exc: jwt.InvalidTokenError) -> Unauthenticated:
    for kind, reason, message in _REASONS:
        if isinstance(exc, kind):
            return Unauthenticated(message, reason)
    raise AssertionError("unreachable: InvalidTokenError is the last row")


class KeySource(Protocol):
    async def keys_for(self, kid: str | None, alg: str) -> tuple[Any, ...]:
        """The keys that may verify a token with this header, at least one (each is tried until one
        does); raise :class:`Unauthenticated` when there is none."""
        ...

    def version(self) -> Hashable | None:
        """Changes whenever the keys do (a token verified before is then verified again); None
        while the keys in hand may no longer be used without a fetch (nothing is accepted unchecked)."""
        ...

    async def close(self) -> None: ...


class SharedSecret:
    def __init__(self, secret: str) -> None:
        self._secret = secret

    async def keys_for(self, kid: str | None, alg: str) -> tuple[Any, ...]:
        return (self._secret,)

    def version(self) -> Hashable | None:
        return 0

    async def close(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Jwk:
    """A key of a JWKS, and what says which tokens it may verify (RFC 7517, 4.2 to 4.5)."""

    kid: Any
    use: Any
    #: the JWK's own ``alg``; None when it states none
    alg: str | None
    #: what PyJWT reads it for: its ``alg``, or the one its ``kty`` (and ``crv``) names
    default_alg: str
    kty: str
    key: Any

    def verifies(self, alg: str) -> bool:
        if self.use not in (None, "sig"):
            return False  # an encryption key ("enc") is not one a token may be signed with
        if self.alg is not None:
            return alg == self.alg  # an RS256 key is not a PS256 key, although both are RSA
        # No alg stated: an algorithm of its type; an RSA key serves RS* and PS*, an EC or OKP key
        # the one of its curve.
        return alg == self.default_alg or (self.kty == "RSA" and alg[:2] in ("RS", "PS"))

    @property
    def kind(self) -> str:
        """What it is to :meth:`verifies`, for a message: its type, and the algorithms or use it serves."""
        if self.use not in (None, "sig"):
            return f"{self.kty} for use {self.use!r}"
        if self.alg is not None:
            return f"{self.kty} {self.alg}"
        return "RSA (RS*, PS*)" if self.kty == "RSA" else f"{self.kty} ({self.default_alg})"


#: the keys of a JWKS document, in its order
KeySet = tuple[_Jwk, ...]


def unfit_for(keys: KeySet, algorithms: tuple[str, ...]) -> str | None:
    """None when a key of ``keys`` may verify a token of one of ``algorithms`` (as tokens are
    verified); otherwise the kinds of key they are, comma-separated: such a set refuses every token."""
    if any(k.verifies(alg) for k in keys for alg in algorithms):
        return None
    return ", ".join(dict.fromkeys(k.kind for k in keys))


def _named(keys: KeySet | None, kid: str | None) -> list[_Jwk]:
    if keys is None:
        return []
    if kid is None:
        # Without a kid, a set of one key is unambiguous; a larger set is not.
        return list(keys) if len(keys) == 1 else []
    return [k for k in keys if k.kid == kid]


def _fitting(keys: KeySet | None, kid: str | None, alg: str) -> tuple[Any, ...]:
    """The keys a token of ``alg`` naming ``kid`` may be verified with. Every key of that kid is one
    (an RSA and an EC key may share a kid, RFC 7517 4.5: the first one alone refused the other's
    tokens), as long as it is a signing key for that algorithm."""
    return tuple(k.key for k in _named(keys, kid) if k.verifies(alg))


def _unfit() -> Unauthenticated:
    return Unauthenticated("the token's algorithm does not fit the key it names (its type, alg or use)", "TOKEN_ALGORITHM")


def _none_fits(keys: KeySet | None, kid: str | None) -> Unauthenticated:
    """Why :func:`_fitting` found no key: the kid names none, or none that signs with the algorithm."""
    return _unfit() if _named(keys, kid) else _unknown_key()


def _parsed(text: str | bytes) -> Any:
    """JSON as Python; ValueError also for JSON nested deeper than the parser goes, which raised
    RecursionError past every handler (a JWKS endpoint's answer ended the call as INTERNAL)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested deeper than the parser reads") from None


def _key_set(data: Any, weak: Callable[[str], None]) -> KeySet:
    """A JWKS document as the keys PyJWT can use, none if it holds none: read while serving, that is
    every key revoked, not a document to ignore. ValueError when it is no JWKS document at all. A key
    shorter than its algorithm's minimum (an RSA key under 2,048 bits, which PyJWT only warned of)
    is told to ``weak`` and left out, unless ``weak`` raises."""
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError("not a JWKS document (an object with a 'keys' list)")
    keys = []
    for jwk in data["keys"]:
        if not isinstance(jwk, dict):
            continue
        try:
            parsed = jwt.PyJWK(jwk)
        except (jwt.PyJWTError, KeyError, TypeError, ValueError, NotImplementedError):
            # One PyJWT does not verify with (an encryption key's RSA-OAEP): skipped, as PyJWKSet
            # does. NotImplementedError is PyJWT's for "alg": "none", which escaped every handler:
            # calls failed INTERNAL, or a fetched JWKS was thrown away with the new keys it brought.
            continue
        if problem := parsed.Algorithm.check_key_length(parsed.key):
            weak(f"key '{jwk.get('kid')}': {problem}")
            continue
        stated = jwk.get("alg")
        keys.append(_Jwk(jwk.get("kid"), jwk.get("use"), stated if isinstance(stated, str) else None, parsed.algorithm_name,
                         str(jwk["kty"]), parsed.key))
    return tuple(keys)


def _no_key(data: Any) -> str:
    """Why :func:`_key_set` found no key in a JWKS document, for a message."""
    return "it did not contain any keys" if not data["keys"] else "no key in it is one PyJWT can use"


def read_jwks(path: Path) -> KeySet:
    """The keys of a JWKS file at start-up; OSError when it cannot be read, ValueError when it holds
    no usable JWKS or a key too short for its algorithm. Also what the settings check, so that such a
    file is named there: a JWKS without a key is a configuration error then (no token could ever be
    verified), where a file changed to one while serving revokes every key (:class:`JwksFile`)."""
    data = _parsed(path.read_bytes())
    if not (keys := _key_set(data, weak=_too_weak)):
        raise ValueError(f"unusable JWKS: {_no_key(data)}")
    return keys


def _failure_kind(exc: Exception) -> str:
    """A failed fetch as Health may say it to any caller: the HTTP status, or the error's kind. The
    log's line says more (:func:`failure_text`), which may quote the host or the URL."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, ValueError):  # not JSON (JSONDecodeError, an HTML error page), or no JWKS
        return "the answer is no JWKS document"
    return type(exc).__name__


def _too_weak(problem: str) -> None:
    raise ValueError(problem)


def _unknown_key() -> Unauthenticated:
    return Unauthenticated("the token was signed with a key this service does not know (kid)", "TOKEN_KEY_UNKNOWN")


def _stamp(st: os.stat_result) -> Hashable:
    """What tells one version of a file from another. The modification time and size alone missed a
    file of the same size written within one tick of the clock (``st_mtime`` a float, coarser than
    the file system's nanoseconds), or replaced with its times set back: a file renamed over it (how
    keys are rotated) is another inode."""
    return st.st_mtime_ns, st.st_size, st.st_ino


class JwksFile:
    """Keys from a JWKS file, read again when the file changes (key rotation by replacing the file).

    Changed while serving, a JWKS without a usable key (``{"keys": []}``, only keys too short or of
    no signing algorithm) revokes every key, as does deleting the file: each token is then
    TOKEN_KEY_UNKNOWN until the file holds a key again. A deleted file is not given a grace: a
    rotation replaces the file (a rename), so it is never missing, and a grace would keep trusting
    the keys of a file deleted to revoke them. Only a file that is no JWKS document (half written,
    not JSON) or cannot be read keeps the keys read before."""

    def __init__(self, path: Path) -> None:
        self._path = path
        #: when the keys were read, :func:`_stamp`; None while the file is deleted
        self._stamp: Hashable | None = _stamp(path.stat())
        self._keys: KeySet = read_jwks(path)
        #: why the file cannot be read, as last logged: said once, not with every call
        self._problem: str | None = None

    def _load(self) -> None:
        try:
            st = self._path.stat()
        except FileNotFoundError:
            if self._stamp is not None:
                log.warning("the JWKS file %s is gone: every key it held is revoked, each token refused until it is back", self._path)
            self._keys, self._stamp = (), None
            return
        stamp = _stamp(st)
        if stamp != self._stamp:
            data = _parsed(self._path.read_bytes())
            keys = _key_set(data, weak=lambda problem: log.warning("the JWKS file %s: %s; that key is not used", self._path, problem))
            if not keys:
                log.warning("the JWKS file %s holds no usable key (%s): every key is revoked, each token refused until it holds one",
                            self._path, _no_key(data))
            self._keys, self._stamp = keys, stamp

    async def keys_for(self, kid: str | None, alg: str) -> tuple[Any, ...]:
        try:
            self._load()
            self._problem = None
        except (OSError, ValueError) as exc:
            if str(exc) != self._problem:
                log.warning("cannot read the JWKS file %s (%s); keeping the keys read before", self._path, exc)
                self._problem = str(exc)
        if not (keys := _fitting(self._keys, kid, alg)):
            raise _none_fits(self._keys, kid)
        return keys

    def version(self) -> Hashable | None:
        """The file's modification time, size and inode (one ``stat``): a replaced file is another
        version; None while the file is deleted."""
        try:
            self._load()
        except (OSError, ValueError):
            pass  # the keys read before stay in use (keys_for says why when it is next called)
        return self._stamp

    async def close(self) -> None:
        return None


class JwksUrl:
    def __init__(self, url: str, *, cache_s: float, min_refresh_s: float, timeout_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._url = url
        self._client = httpx.AsyncClient(timeout=timeout_s)
        self._cache_s, self._min_refresh_s, self._clock = cache_s, min_refresh_s, clock
        self._keys: KeySet | None = None
        self._document: Any = None
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()
        #: the fetch of keys past ``cache_s`` that no call waits for, one at a time
        self._background: asyncio.Task[None] | None = None
        #: the fetches calls wait for (:meth:`_fetch`), until they end
        self._fetches: set[asyncio.Task[None]] = set()
        #: how many times a fetch brought another key set
        self._changes = 0
        #: what the last fetch's failure was (:func:`_failure_kind`), None once one succeeds
        self._failure: str | None = None

    async def _refresh(self, every: float) -> None:
        """Fetch the keys unless the last fetch is younger than ``every``: ``min_refresh_s`` for an
        unknown kid, ``cache_s`` for keys that aged (held to ``min_refresh_s`` too, keys an identity
        provider dropped were trusted for ``min_refresh_s`` when that is the longer)."""
        async with self._lock:
            now = self._clock()
            if self._fetched_at is not None and now - self._fetched_at < every:
                return  # another caller just fetched, or a fetch is rate-limited
            self._fetched_at = now
            try:
                resp = await request_bounded(self._client, "GET", self._url)
                resp.raise_for_status()
                document = _parsed(resp.content)
                if document != self._document:
                    # The identity provider's other keys still verify: a weak one is left out, said once per document.
                    url = without_userinfo(self._url)
                    keys = _key_set(document, weak=lambda problem: log.warning("the JWKS from %s: %s; that key is not used", url, problem))
                    if not keys:
                        # The identity provider revoked every key: each token is refused (TOKEN_KEY_UNKNOWN)
                        # until it publishes one, not verified with the keys it dropped.
                        log.warning("the JWKS from %s holds no usable key (%s): every key is revoked", url, _no_key(document))
                    # Counted only once the keys are replaced: a verification that ran during the
                    # fetch used the old ones and is remembered under the old count.
                    self._keys, self._document = keys, document
                    self._changes += 1
                self._failure = None
            except (httpx.HTTPError, ResponseRefused, ValueError) as exc:
                log.warning("cannot fetch the JWKS from %s: %s", without_userinfo(self._url), failure_text(exc))
                self._failure = _failure_kind(exc)
                if self._keys is None:
                    raise Unavailable("the identity provider's signing keys cannot be fetched right now") from exc

    async def _fetch(self, every: float) -> None:
        """:meth:`_refresh` for a call that waits for it, on a task of its own that the call awaits
        shielded. Run in the call, the fetch was cancelled with it (its deadline, its caller's
        cancel) after it had counted against ``min_refresh_s``: every call was then UNAVAILABLE
        (no keys yet), or TOKEN_KEY_UNKNOWN (a rotated key), for that long, and an identity
        provider slower than the callers' deadlines was never fetched from at all."""
        task = asyncio.ensure_future(self._refresh(every))
        self._fetches.add(task)
        task.add_done_callback(self._fetched)
        await asyncio.shield(task)

    def _fetched(self, task: asyncio.Task[None]) -> None:
        self._fetches.discard(task)
        if not task.cancelled():
            task.exception()  # read: the failure of a fetch whose caller gave up is logged by _refresh, not by asyncio

    async def keys_for(self, kid: str | None, alg: str) -> tuple[Any, ...]:
        if self._keys is None:
            await self._fetch(self._min_refresh_s)  # nothing to answer with yet (rate-limited after a failed fetch)
        elif self._fetched_at is None or self._clock() - self._fetched_at >= self._cache_s:
            if self._background is None or self._background.done():
                self._background = asyncio.create_task(self._refresh(self._cache_s))
        keys = _fitting(self._keys, kid, alg)
        if not keys:
            await self._fetch(self._min_refresh_s)  # a rotated key: fetch again (rate-limited)
            keys = _fitting(self._keys, kid, alg)
        if self._keys is None:
            # Never fetched (the fetch just failed, or a failed one holds back the next): no token
            # can be checked, which is not the caller's fault.
            raise Unavailable("the identity provider's signing keys cannot be fetched right now")
        if not keys:
            raise _none_fits(self._keys, kid)
        return keys

    async def health(self, within_s: float) -> tuple[bool, str | None]:
        """Whether keys are held (Health's ``auth`` component), and why none are, or that the last
        refresh failed (the keys held still verify); None: nothing to say. With none held, it asks
        for them as a call would (the same fetch, at most once per ``min_refresh_s``: Health never
        fetches more often than calls may) and waits ``within_s`` at most, the fetch going on for
        the calls after it: a cold server's Health, and its readiness, then say whether keys can be
        had, not that none were asked for yet. The reasons name the failure's kind only: Health
        answers callers without credentials, and the URL may name a realm (the log has the rest)."""
        if self._keys is None:
            # While none are held every fetch is for them: the one in flight is waited for, not one
            # more queued behind it, which fetched again once it had (its time since the last start
            # past min_refresh_s): a fetch for each probe during a slow one, keys held or not.
            fetch = next(iter(self._fetches), None)
            try:
                async with asyncio.timeout(within_s):
                    await (self._fetch(self._min_refresh_s) if fetch is None else asyncio.shield(fetch))
            except TimeoutError:
                if self._keys is None:
                    return False, "no signing keys yet: the identity provider has not answered the JWKS fetch (it goes on)"
            except Unavailable:
                pass  # told by self._failure
        if self._keys is None:
            # The fetch failed, now or within min_refresh_s (which holds the next one back).
            return False, f"no signing keys: the JWKS cannot be fetched ({self._failure or 'no fetch has ended yet'}; the server's log says more)"
        if self._failure is not None:
            return True, f"the last JWKS refresh failed ({self._failure}): the keys fetched before still verify"
        return True, None

    def version(self) -> Hashable | None:
        """How many fetches brought another key set; None once the keys are older than ``cache_s``
        (then only :meth:`keys_for`, which fetches them again, may be trusted) until that fetch starts."""
        if self._fetched_at is None or self._clock() - self._fetched_at >= self._cache_s:
            return None
        return self._changes

    async def close(self) -> None:
        for task in (self._background, *self._fetches):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Unavailable):
                    await task
        await self._client.aclose()


@dataclass(frozen=True, slots=True)
class _Verified:
    claims: Mapping[str, Any]
    #: ``exp`` plus the leeway, on the wall clock (PyJWT's)
    expires: float
    #: ``remember_s`` after it was verified, on the monotonic clock
    until: float
    #: the key source's version before it was verified
    keys: Hashable
    #: what remembering it holds: the token and its claims (:func:`held_bytes`)
    weight: int


class TokenVerifier:
    def __init__(self, keys: KeySource, algorithms: tuple[str, ...], *, issuer: str | None, audience: str | None, leeway_s: float,
                 remember_s: float = 0.0, remember_max: int = 4096, remember_bytes: int = REMEMBERED_BYTES,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        """At most ``remember_max`` tokens are remembered, weighing ``remember_bytes`` in all: by count
        alone, 4,096 tokens of 300 groups held their 76 MB and 120 MiB of claims (about 2.5 GiB at
        1,000 groups of 255 characters)."""
        self._keys = keys
        self._algorithms = algorithms
        self._issuer, self._audience, self._leeway = issuer, audience, leeway_s
        self._required = ["exp", *(["iss"] if issuer else []), *(["aud"] if audience else [])]
        self._remember_s, self._remember_max, self._remember_bytes = remember_s, remember_max, remember_bytes
        self._clock, self._monotonic = clock, monotonic
        #: tokens that verified, the least recently used first
        self._verified: OrderedDict[str, _Verified] = OrderedDict()
        #: the weight of what :attr:`_verified` holds
        self._held = 0

    async def verify(self, token: str) -> Mapping[str, Any]:
        """The token's claims, once its signature, algorithm, issuer, audience and times check out,
        or while a verification of the same token still holds (see the module's text). Read-only:
        the same mapping may be handed to later calls (nested values too: never change them)."""
        # Read before any key is used: should the keys change meanwhile, the next call verifies again.
        keys = self._keys.version()
        known = self._verified.get(token)
        if known is not None:
            if keys is not None and keys == known.keys and self._clock() < known.expires and self._monotonic() < known.until:
                self._verified.move_to_end(token)
                return known.claims
            self._forget(token)
        claims = MappingProxyType(await self._check(token))
        if keys is not None and self._remember_s > 0 and self._remember_max > 0:
            try:
                expires = float(claims["exp"]) + self._leeway
            except (OverflowError, TypeError, ValueError):
                return claims  # an exp no float holds: verified every time
            weight = held_bytes(token) + held_bytes(claims)
            if weight > self._remember_bytes:
                return claims  # heavier than the whole budget: verified every time
            if token in self._verified:
                # Calls of one token that waited together for its key (a JWKS fetched again) each
                # remember it: the one before this goes, or its weight would stay counted.
                self._forget(token)
            while self._verified and (len(self._verified) >= self._remember_max or self._held + weight > self._remember_bytes):
                self._forget(next(iter(self._verified)))
            self._verified[token] = _Verified(claims, expires, self._monotonic() + self._remember_s, keys, weight)
            self._held += weight
        return claims

    def _forget(self, token: str) -> None:
        self._held -= self._verified.pop(token).weight

    async def _check(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            # DecodeError, and also InvalidTokenError itself for a header PyJWT reads but refuses (a
            # kid that is not a string, a crit it does not know), which grpc answered as UNKNOWN.
            raise Unauthenticated("the token is not a well-formed JWT", "TOKEN_MALFORMED") from None
        alg = header.get("alg")
        # 'none' and any algorithm outside the allow-list are refused before a key is looked at.
        if not isinstance(alg, str) or alg not in self._algorithms:
            raise Unauthenticated(f"the token's algorithm is not accepted (accepted: {', '.join(self._algorithms)})", "TOKEN_ALGORITHM")
        kid = header.get("kid")
        refused = _unfit()
        for key in await self._keys.keys_for(kid if isinstance(kid, str) else None, alg):
            try:
                return jwt.decode(
                    token,
                    key,
                    algorithms=[alg],
                    issuer=self._issuer,
                    audience=self._audience,
                    leeway=self._leeway,
                    # PyJWT's own rule without an audience set: a token naming one is for another
                    # service (a shared realm mints them for every app in it) and is refused.
                    # A key below its algorithm's minimum (RSA under 2,048 bits) is refused, not
                    # warned of. Not a secret: RETRIEVAL_JWT_SECRET's 32 characters are less than
                    # PyJWT's minimum for HS384 and HS512, and every token would be refused.
                    options={"require": self._required, "enforce_minimum_key_length": not alg.startswith("HS")},
                )
            except jwt.InvalidSignatureError:
                refused = _refusal(jwt.InvalidSignatureError())  # another key of its kid may have signed it
            except jwt.InvalidTokenError as exc:
                # Its signature verified (or it is malformed whatever the key): the claims are refused.
                raise _refusal(exc) from None
            except (jwt.PyJWTError, TypeError, ValueError):
                # The key is of another type than its algorithm (a curve other than ES384's): PyJWT
                # raises outside InvalidTokenError, which grpc answered as UNKNOWN.
                pass
        raise refused

    async def close(self) -> None:
        await self._keys.close()
