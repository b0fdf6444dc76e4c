"""Who is calling. Until authentication lands, identity comes from call metadata."""

from __future__ import annotations

from collections.abc import Iterable

from retrieval_server.domain import Identity, InvalidArgument, Role

USER_ID_HEADER = "x-user-id"
ROLE_HEADER = "x-user-role"
MAX_USER_ID_CHARS = 255


def identity_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> Identity:
    values = {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in (metadata or ())}
    user_id = values.get(USER_ID_HEADER, "").strip() or None
    if user_id is not None and len(user_id) > MAX_USER_ID_CHARS:
        raise InvalidArgument(f"{USER_ID_HEADER} must be at most {MAX_USER_ID_CHARS} characters")
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
