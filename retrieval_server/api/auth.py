"""Who is calling: one authenticator per RETRIEVAL_AUTH_MODE, applied as a layer of the server's edge.

* ``none`` (development): ``x-user-id`` / ``x-user-role`` / ``x-user-groups`` are believed. The
  settings keep such a server on loopback unless RETRIEVAL_ALLOW_UNAUTHENTICATED_REMOTE says otherwise.
* ``jwt``: ``authorization: Bearer <token>`` verified (signature, algorithm, issuer, audience,
  time); the user id, role and groups come from its claims. Identity headers are ignored: a
  header never outranks the token.
* ``gateway``: the identity headers are believed only from a mutual-TLS peer whose certificate
  names (SAN or CN) are on RETRIEVAL_GATEWAY_PEERS; any other caller is refused.

The layer verifies every call to RetrievalService before the servicer runs and hands the
result over in a context variable: the servicer, and the workflow after it, only ever see a
verified :class:`Identity`. grpc.health.v1 and reflection need no credentials, nor does the
Health RPC (credentials sent to it are still verified).
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import grpc
from cryptography import x509
from cryptography.x509.oid import NameOID

from retrieval_server.api.errors import abort
from retrieval_server.api.handlers import Refused, rewrap
from retrieval_server.api.identity import GROUPS_HEADER, MAX_AUTHORIZATION_BYTES, MAX_IDENTITY_HEADER_BYTES, ROLE_HEADER, USER_ID_HEADER, HeaderIdentities
from retrieval_server.api.tokens import JwksFile, JwksUrl, KeySource, SharedSecret, TokenVerifier
from retrieval_server.config import Settings
from retrieval_server.domain import Identity, InvalidArgument, Role, ServiceError, Unauthenticated
from retrieval_server.identifiers import MAX_GROUPS, exact_identity

if TYPE_CHECKING:
    from retrieval_server.app import SigningKeys

log = logging.getLogger(__name__)

SERVICE_PREFIX = "/retrieval.v1.RetrievalService/"
#: RPCs that answer without credentials (but refuse invalid ones)
OPEN_METHODS = frozenset({f"{SERVICE_PREFIX}Health"})
_current: contextvars.ContextVar[Identity] = contextvars.ContextVar("retrieval_identity")
_PRIVILEGE = {Role.USER: 0, Role.ADMIN: 1, Role.SUPER_ADMIN: 2}


def current_identity() -> Identity:
    """The verified identity of the call being served (set by :class:`Authenticate`)."""
    return _current.get()


class Authenticator(Protocol):
    mode: str
    #: the metadata keys it takes the caller's identity from
    reads: frozenset[str]
    #: whether the keys tokens are verified with are held, when they come from a JWKS URL (Health)
    signing_keys: SigningKeys | None

    async def identify(self, metadata: Callable[[], Mapping[str, str]], context: grpc.aio.ServicerContext, required: bool) -> Identity:
        """The caller; ``metadata()`` reads the call's metadata of the keys in :attr:`reads`, refusing one
        sent twice (read only once the caller may name itself at all)."""
        ...

    async def close(self) -> None: ...


_IDENTITY_HEADERS = frozenset({USER_ID_HEADER, ROLE_HEADER, GROUPS_HEADER})


def _metadata(context: grpc.aio.ServicerContext, reads: frozenset[str]) -> dict[str, str]:
    """The call's metadata of the keys in ``reads``, one value a key. A key sent more than once is
    refused rather than its last value believed: which value names the caller is a guess when,
    say, a proxy added its own header beside the one the caller sent."""
    out: dict[str, str] = {}
    for k, v in context.invocation_metadata() or ():
        key = k.lower()
        if key not in reads:
            continue
        if key in out:
            if key == "authorization":
                raise Unauthenticated("the authorization metadata must be sent once", "TOKEN_MALFORMED")
            raise InvalidArgument(f"{key} must be sent at most once", field=key)
        limit = MAX_AUTHORIZATION_BYTES if key == "authorization" else MAX_IDENTITY_HEADER_BYTES
        if len(v) > limit:
            too_long = f"{key} must be at most {limit} bytes (got {len(v)})"
            if key == "authorization":
                raise Unauthenticated(too_long, "TOKEN_MALFORMED")
            raise InvalidArgument(too_long, field=key)
        out[key] = v.decode(errors="replace") if isinstance(v, bytes) else v
    return out


class HeaderAuthenticator:
    """``none``: what the headers say."""

    mode = "none"
    reads = _IDENTITY_HEADERS
    signing_keys: SigningKeys | None = None

    def __init__(self) -> None:
        self._identities = HeaderIdentities()

    async def identify(self, metadata: Callable[[], Mapping[str, str]], context: grpc.aio.ServicerContext, required: bool) -> Identity:
        return self._identities(metadata())

    async def close(self) -> None:
        return None


def peer_names(context: grpc.aio.ServicerContext) -> set[str]:
    """The names in the peer's verified client certificate: its DNS and URI subject alternative
    names, or its common name when it has no SAN at all and one CN only (RFC 6125: a certificate
    that names its subject in SANs is not also that of the name in its CN, which a CA may issue
    from a client's request unchecked); empty without mutual TLS. grpc lists e-mail and IP SANs
    among the SANs too: a CA checks an e-mail address far less than a host name, and one spelled
    like a gateway's name made its holder a gateway. DNS names (and a CN, a host name) are
    lowercased, URIs kept as they are: see :func:`peer_name`."""
    auth = context.auth_context() or {}
    if auth.get("x509_subject_alternative_name"):
        hosts, uris = auth.get("peer_dns", ()), auth.get("peer_uri", ())
    else:
        pem = auth.get("x509_pem_cert")
        hosts, uris = _common_name(pem[0]) if pem else (), ()
    return {_text(v).lower() for v in hosts} | {_text(v) for v in uris}


@functools.lru_cache(maxsize=64)  # parsing costs 16 µs, on every call of a gateway whose certificate has no SAN
def _common_name(pem: bytes) -> tuple[str, ...]:
    """The CN of a PEM certificate whose subject holds exactly one. grpc's x509_common_name is the
    first of several: /CN=gateway.internal/CN=intruder was taken for the gateway, whichever of the
    two the CA checked; a subject of more than one CN names no one."""
    try:
        names = x509.load_pem_x509_certificate(pem).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    except ValueError:
        return ()
    return (_text(names[0].value),) if len(names) == 1 else ()


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def peer_name(name: str) -> str:
    """A RETRIEVAL_GATEWAY_PEERS name as :func:`peer_names` spells it: a DNS name is case-insensitive
    (RFC 4343), and a CA may issue ``Gateway.Internal`` for the gateway listed as ``gateway.internal``;
    a URI (``spiffe://...``, a ':' after its scheme, which no DNS name holds) is compared exactly."""
    return name if ":" in name else name.lower()


class GatewayAuthenticator:
    """``gateway``: identity headers from the allow-listed gateways only."""

    mode = "gateway"
    reads = _IDENTITY_HEADERS
    signing_keys: SigningKeys | None = None

    def __init__(self, peers: Sequence[str]) -> None:
        self._peers = frozenset(peer_name(p) for p in peers)
        # Unlike mode none (development), a role needs a user, as a token's user claim is required.
        self._identities = HeaderIdentities(verified_by="gateway", role_needs_user=True)

    async def identify(self, metadata: Callable[[], Mapping[str, str]], context: grpc.aio.ServicerContext, required: bool) -> Identity:
        # Who sent the headers before what they say: a peer that is no gateway is refused as such,
        # however its headers are formed.
        if not peer_names(context) & self._peers:
            if required or any(k.lower() in _IDENTITY_HEADERS for k, _ in context.invocation_metadata() or ()):
                raise Unauthenticated(
                    "this service takes calls through its gateway only: the client certificate is not one of the allowed gateways",
                    "PEER_NOT_ALLOWED",
                )
            return Identity()
        return self._identities(metadata())

    async def close(self) -> None:
        return None


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    """A claim by name, or by dotted path into nested objects (``realm_access.roles``)."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _names(value: Any, claim: str) -> list[str]:
    """A claim's names: a string is one name, whatever it holds. Split on spaces or commas, the
    one group "Sales EMEA" read documents granted to the groups "Sales" and "EMEA". ValueError for
    anything but a string or a list of strings (absent: none): a groups claim that was an object
    was read as no groups, and an item that was no string was dropped, the caller silently losing
    what those groups are granted."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []  # "": no groups, as some mappers say it
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"the token's {claim} claim must be a string or a list of strings (got {type(value).__name__})")
    if odd := [type(v).__name__ for v in value if not isinstance(v, str)]:
        raise ValueError(f"the token's {claim} claim must be a string or a list of strings (it holds a {odd[0]})")
    return list(value)


class JwtAuthenticator:
    """``jwt``: a verified bearer token; claims mapped to a user id, a role and groups."""

    mode = "jwt"
    reads = frozenset({"authorization"})

    def __init__(self, verifier: TokenVerifier, settings: Settings, signing_keys: SigningKeys | None = None) -> None:
        self._verifier = verifier
        self.signing_keys = signing_keys
        self._user_claim, self._role_claim, self._groups_claim = settings.jwt_user_claim, settings.jwt_role_claim, settings.jwt_groups_claim
        self._role_map = {k: Role(v) for k, v in settings.jwt_role_map.items()}

    def _role(self, claims: Mapping[str, Any]) -> Role:
        roles = []
        for name in _names(_claim(claims, self._role_claim), self._role_claim):
            role = self._role_map.get(name) if self._role_map else None
            # Exactly as written: an identity provider's own "admin" role is not ours.
            if role is None and name in ("SUPER_ADMIN", "ADMIN", "USER") and not self._role_map:
                role = Role(name)
            if role is not None:
                roles.append(role)
        # An authenticated caller without a recognised role is a USER.
        return max(roles, key=_PRIVILEGE.__getitem__, default=Role.USER)

    async def identify(self, metadata: Callable[[], Mapping[str, str]], context: grpc.aio.ServicerContext, required: bool) -> Identity:
        header = metadata().get("authorization", "")
        if not header:
            if required:
                raise Unauthenticated("this RPC needs 'authorization: Bearer <token>' metadata", "TOKEN_MISSING")
            return Identity()
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the authorization metadata must be 'Bearer <token>'", "TOKEN_MALFORMED")
        claims = await self._verifier.verify(token.strip())
        raw_user = _claim(claims, self._user_claim)
        if raw_user is None:
            raise Unauthenticated(f"the token has no '{self._user_claim}' claim naming the user", "TOKEN_CLAIM_MISSING")
        try:
            if not isinstance(raw_user, str):
                raise ValueError(f"the token's {self._user_claim} claim must be a string (got {type(raw_user).__name__})")
            user = exact_identity(raw_user, f"the token's {self._user_claim} claim")
            groups = tuple(sorted({exact_identity(g, f"a group of the token's {self._groups_claim} claim", user=False)
                                   for g in _names(_claim(claims, self._groups_claim), self._groups_claim)})) if self._groups_claim else ()
            if len(groups) > MAX_GROUPS:
                # Every read names each of them, twice: 2,000 made a graph statement SQLite refuses.
                raise ValueError(f"the token's {self._groups_claim} claim names {len(groups)} groups; at most {MAX_GROUPS} are read")
            role = self._role(claims)
        except ValueError as exc:
            raise Unauthenticated(str(exc), "TOKEN_CLAIM_INVALID") from None
        return Identity(user, role, groups, verified_by="jwt")

    async def close(self) -> None:
        await self._verifier.close()


def authenticator_for(settings: Settings) -> Authenticator:
    if settings.auth_mode == "gateway":
        return GatewayAuthenticator(settings.gateway_peers)
    if settings.auth_mode == "jwt":
        keys: KeySource
        # A secret and a file (read at start-up) always hold keys; a URL's must be fetched.
        signing_keys: SigningKeys | None = None
        if settings.jwt_secret:
            keys = SharedSecret(settings.jwt_secret)
        elif settings.jwt_jwks_file:
            keys = JwksFile(settings.jwt_jwks_file)
        else:
            url = JwksUrl(settings.jwt_jwks_url or "", cache_s=settings.jwt_jwks_cache_s, min_refresh_s=settings.jwt_jwks_min_refresh_s)
            keys, signing_keys = url, url.health
        # A verified token is accepted again, unchecked, at most as long as fetched keys are trusted.
        verifier = TokenVerifier(keys, settings.accepted_jwt_algorithms, issuer=settings.jwt_issuer,
                                 audience=settings.jwt_audience, leeway_s=settings.jwt_leeway_s, remember_s=settings.jwt_jwks_cache_s)
        return JwtAuthenticator(verifier, settings, signing_keys)
    return HeaderAuthenticator()


class Authenticate:
    """Verify the caller of every RetrievalService RPC; refuse with UNAUTHENTICATED (and ErrorInfo).
    A layer of :class:`~retrieval_server.api.edge.Edge`."""

    def __init__(self, authenticator: Authenticator, on_refused: Refused | None = None) -> None:
        self._auth = authenticator
        #: told of every refused call (the audit log's lines for admin RPCs)
        self._on_refused = on_refused

    def __call__(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if not method.startswith(SERVICE_PREFIX):
            return handler
        return rewrap(handler, before_call=self._verifier(method))

    def _verifier(self, method: str) -> Callable[[grpc.aio.ServicerContext], Awaitable[None]]:
        required = method not in OPEN_METHODS

        async def verify(context: grpc.aio.ServicerContext) -> None:
            try:
                identity = await self._auth.identify(lambda: _metadata(context, self._auth.reads), context, required)
            except Exception as exc:  # UNAUTHENTICATED, INVALID_ARGUMENT (a malformed header), UNAVAILABLE (no keys)
                if not isinstance(exc, ServiceError):
                    # Still refused, and audited: an unforeseen failure was answered UNKNOWN
                    # without details, and an admin call refused that way left no audit line.
                    log.exception("verifying the credentials of %s failed", method)
                    exc = ServiceError(f"internal error verifying the credentials of {method.rsplit('/', 1)[-1]}")
                if self._on_refused is not None:
                    self._on_refused(method, context, exc)
                await abort(context, exc)
            _current.set(identity)

        return verify
