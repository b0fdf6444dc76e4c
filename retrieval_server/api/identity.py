"""Who is calling. Until authentication lands, identity comes from call metadata."""

from __future__ import annotations

from collections.abc import Iterable

from retrieval_server.domain import Identity, InvalidArgument, Role
from retrieval_server.identifiers import MAX_USER_ID_CHARS, clean_identifier, trim

USER_ID_HEADER = "x-user-id"
ROLE_HEADER = "x-user-role"


def identity_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> Identity:
    values = {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in (metadata or ())}
    raw_user = values.get(USER_ID_HEADER, "")
    try:
        user_id = clean_identifier(raw_user, USER_ID_HEADER, MAX_USER_ID_CHARS) if trim(raw_user) else None
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    raw_role = values.get(ROLE_HEADER, "").strip().upper()
    if not raw_role:
        role = Role.USER if user_id else Role.ANONYMOUS
    else:
        try:
            role = Role(raw_role)
        except ValueError:
            allowed = ", ".join(r.value for r in Role)
            raise InvalidArgument(f"{ROLE_HEADER} must be one of {allowed} (got '{raw_role}')") from None
    return Identity(user_id=user_id, role=role)
