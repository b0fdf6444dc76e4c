"""Who is calling, as the identity headers say (``none`` and ``gateway`` authentication)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_server.domain import Identity, InvalidArgument, Role
from retrieval_server.identifiers import MAX_GROUPS, MAX_USER_ID_CHARS, exact_identity

USER_ID_HEADER = "x-user-id"
ROLE_HEADER = "x-user-role"
GROUPS_HEADER = "x-user-groups"
_MAX_ROLE_CHARS = max(len(role.value) for role in Role) + 8
#: the longest an identity header's value (x-user-*) may be, checked before it is split: x-user-groups
#: of MAX_GROUPS names of MAX_USER_ID_CHARS and their commas, and 64 KiB more. gRPC holds a call's
#: whole metadata to server.MAX_METADATA_BYTES once the client has acknowledged the server's
#: settings, but takes any length before: 14.9 MB of x-user-groups took 3 s and 400 MB to split
#: into a set, on the event loop, before its groups were counted.
MAX_IDENTITY_HEADER_BYTES = MAX_GROUPS * (MAX_USER_ID_CHARS + 1) + 64 * 1024
#: the longest ``authorization`` value, checked before the token is verified: "Bearer " and a token
#: whose groups claim names MAX_GROUPS names of MAX_USER_ID_CHARS ASCII characters (each quoted,
#: and a comma) in base64url (4 bytes for 3), and 64 KiB more for its header, signature and other
#: claims. Such a token is longer than x-user-groups of the same groups: held to that header's
#: limit, one the claim rules accept was refused.
MAX_AUTHORIZATION_BYTES = len("Bearer ") + 4 * ((MAX_GROUPS * (MAX_USER_ID_CHARS + 3) + 2) // 3) + 64 * 1024


_NAMED_ROLES = tuple(r.value for r in Role if r is not Role.ANONYMOUS)
#: what CPython spends on a short string besides its characters
_STRING_OVERHEAD = 56
#: bytes of groups (headers) or of tokens and claims (api.tokens) a process remembers callers by
REMEMBERED_BYTES = 16 * 1024 * 1024


def held_bytes(value: Any) -> int:
    """About what the strings of ``value`` hold (a string, or lists and mappings of them, as a
    token's claims are): each one's characters and a string's overhead. Other values count nothing:
    the strings are what a caller makes heavy (a token of 1,000 groups of 255 characters).

    Walked with a stack of its own, not by recursion: a signed token's claim nested 480 deep raised
    RecursionError, and the call ended as INTERNAL with a traceback logged."""
    total, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item) + _STRING_OVERHEAD
        elif isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return total


def groups_from_header(value: str) -> tuple[str, ...]:
    """The distinct groups an ``x-user-groups`` value names, sorted; InvalidArgument when one is
    malformed or there are more than :data:`MAX_GROUPS`.

    A comma-separated list (RFC 9110, 5.6.1): space and tab around an item are no part of it, and
    an empty item is none. Each group is taken exactly, as a token's are: "hr\u200b" trimmed to
    "hr" read that group's documents."""
    names = {item.strip(" \t") for item in value.split(",")} - {""}
    # Counted before each is checked: every read lists them, and a header of thousands is refused
    # without normalizing each one (a valid name is as sent, so the count is the same).
    if len(names) > MAX_GROUPS:
        raise InvalidArgument(f"{GROUPS_HEADER} must name at most {MAX_GROUPS} groups (got {len(names)})")
    try:
        return tuple(exact_identity(name, GROUPS_HEADER, user=False) for name in sorted(names))
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def identity_from_headers(user_id: str, role: str, groups: str = "", verified_by: str = "headers", role_needs_user: bool = False) -> Identity:
    """The identity the headers' values (empty when absent) name; InvalidArgument when one is
    malformed, or when ``role_needs_user`` and a role comes without a user id."""
    try:
        # Space and tab around a header's value are no part of it (RFC 9110, 5.5); anything else
        # that trimming would drop names another account, and is refused.
        user_id = user_id.strip(" \t")
        user = exact_identity(user_id, USER_ID_HEADER) if user_id else None
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    member_of = groups_from_header(groups) if groups else ()
    if member_of and user is None:
        # Groups are a user's: the anonymous caller would read a group's documents as no one.
        raise InvalidArgument(f"{GROUPS_HEADER} must come with {USER_ID_HEADER}: groups are those of a user")
    # Only space and tab are trimmed, and the name compared as written, as a token's role claim
    # is: upper-cased, "adm\u0131n" (a dotless i) and "\u017fuper_admin" (a long s) were ADMIN and
    # SUPER_ADMIN, and str.strip() took an em space or a control character for white space.
    raw_role = role.strip(" \t")
    if raw_role and user is None and role_needs_user:
        # A gateway speaks for a user: an ADMIN of no one wrote documents audited as nobody's.
        raise InvalidArgument(f"{ROLE_HEADER} must come with {USER_ID_HEADER}: a role is that of a user", field=USER_ID_HEADER)
    if not raw_role:
        return Identity(user, Role.USER if user else Role.ANONYMOUS, member_of, verified_by=verified_by)
    # ANONYMOUS is what a caller without a user id is: named with one, it read that user's
    # documents while calling itself anonymous.
    if raw_role == Role.ANONYMOUS.value and user is None:
        return Identity(role=Role.ANONYMOUS, verified_by=verified_by)
    if raw_role not in _NAMED_ROLES:
        got = raw_role if len(raw_role) <= _MAX_ROLE_CHARS else raw_role[:_MAX_ROLE_CHARS] + "…"
        # repr: a control or invisible character in the value is shown, not printed
        raise InvalidArgument(f"{ROLE_HEADER} must be one of {', '.join(_NAMED_ROLES)} (got {got!r})")
    return Identity(user, Role(raw_role), member_of, verified_by=verified_by)


class HeaderIdentities:
    """:func:`identity_from_headers`, remembered per set of the three header values.

    A caller sends the same headers on every call, and parsing them (Unicode normalization,
    a category check per character) cost more than the rest of an answer served from the cache.
    A set that fails is not remembered, nor one longer than its identity can be written (white
    space around a valid value, or empty and repeated groups, still parse: 4,096 padded sets
    would hold tens of MB). At most ``size`` sets, and groups of at most ``group_bytes`` in all
    (:func:`held_bytes` of the header as sent, the groups and the principals, and the reads key): 4,096 users of 300
    groups each held 233 MiB. The oldest is dropped first."""

    def __init__(self, verified_by: str = "headers", size: int = 4096, group_bytes: int = REMEMBERED_BYTES, role_needs_user: bool = False) -> None:
        self._verified_by, self._size, self._group_bytes, self._role_needs_user = verified_by, size, group_bytes, role_needs_user
        self._known: dict[tuple[str, str, str], Identity] = {}
        self._held = 0

    @staticmethod
    def _weight(key: tuple[str, str, str], identity: Identity) -> int:
        return held_bytes(key[2]) + held_bytes(identity.groups) + held_bytes(identity.principals) + len(identity.reads_key)

    def __call__(self, metadata: Mapping[str, str]) -> Identity:
        key = (metadata.get(USER_ID_HEADER, ""), metadata.get(ROLE_HEADER, ""), metadata.get(GROUPS_HEADER, ""))
        identity = self._known.get(key)
        if identity is None:
            identity = identity_from_headers(*key, verified_by=self._verified_by, role_needs_user=self._role_needs_user)
            weight = self._weight(key, identity)
            if (len(key[0]) > MAX_USER_ID_CHARS or len(key[1]) > _MAX_ROLE_CHARS or len(key[2]) > len(", ".join(identity.groups))
                    or weight > self._group_bytes):
                return identity
            while self._known and (len(self._known) >= self._size or self._held + weight > self._group_bytes):
                oldest = next(iter(self._known))
                self._held -= self._weight(oldest, self._known.pop(oldest))
            self._known[key] = identity
            self._held += weight
        return identity
