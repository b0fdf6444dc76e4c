"""Who is calling, as the identity headers say (``none`` and ``gateway`` authentication)."""

from __future__ import annotations

from collections.abc import Mapping

from retrieval_server.domain import Identity, InvalidArgument, Role
from retrieval_server.identifiers import MAX_USER_ID_CHARS, exact_identity

USER_ID_HEADER = "x-user-id"
ROLE_HEADER = "x-user-role"
_MAX_ROLE_CHARS = max(len(role.value) for role in Role) + 8


_NAMED_ROLES = tuple(r.value for r in Role if r is not Role.ANONYMOUS)


def identity_from_headers(user_id: str, role: str, verified_by: str = "headers") -> Identity:
    """The identity the two headers' values (empty when absent) name; InvalidArgument when either is malformed."""
    try:
        # Space and tab around a header's value are no part of it (RFC 9110, 5.5); anything else
        # that trimming would drop names another account, and is refused.
        user_id = user_id.strip(" \t")
        user = exact_identity(user_id, USER_ID_HEADER) if user_id else None
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    raw_role = role.strip().upper()
    if not raw_role:
        return Identity(user_id=user, role=Role.USER if user else Role.ANONYMOUS, verified_by=verified_by)
    # ANONYMOUS is what a caller without a user id is: named with one, it read that user's
    # documents while calling itself anonymous.
    if raw_role == Role.ANONYMOUS.value and user is None:
        return Identity(role=Role.ANONYMOUS, verified_by=verified_by)
    if raw_role not in _NAMED_ROLES:
        got = raw_role if len(raw_role) <= _MAX_ROLE_CHARS else raw_role[:_MAX_ROLE_CHARS] + "…"
        raise InvalidArgument(f"{ROLE_HEADER} must be one of {', '.join(_NAMED_ROLES)} (got '{got}')")
    return Identity(user_id=user, role=Role(raw_role), verified_by=verified_by)


class HeaderIdentities:
    """:func:`identity_from_headers`, remembered per pair of header values.

    A caller sends the same two headers on every call, and parsing them (Unicode normalization,
    a category check per character) cost more than the rest of an answer served from the cache.
    A pair that fails is not remembered, nor one longer than an identity can be (white space
    around a valid value still parses: 4,096 padded pairs would hold tens of MB). At most
    ``size`` pairs; the oldest is dropped first."""

    def __init__(self, verified_by: str = "headers", size: int = 4096) -> None:
        self._verified_by, self._size = verified_by, size
        self._known: dict[tuple[str, str], Identity] = {}

    def __call__(self, metadata: Mapping[str, str]) -> Identity:
        key = (metadata.get(USER_ID_HEADER, ""), metadata.get(ROLE_HEADER, ""))
        identity = self._known.get(key)
        if identity is None:
            identity = identity_from_headers(*key, self._verified_by)
            if len(key[0]) > MAX_USER_ID_CHARS or len(key[1]) > _MAX_ROLE_CHARS:
                return identity
            if len(self._known) >= self._size:
                del self._known[next(iter(self._known))]
            self._known[key] = identity
        return identity
