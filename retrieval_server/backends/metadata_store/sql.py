"""SQL shared by the stores' queries: the access rule and long IN lists."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from retrieval_server.domain import AccessFilter

# SQLite and MariaDB both bound the number of parameters; chunk long IN lists.
IN_CHUNK = 500


def in_chunks(items: Sequence[str], size: int = IN_CHUNK) -> Iterator[Sequence[str]]:
    return (items[i : i + size] for i in range(0, len(items), size))


def readable_clause(access: AccessFilter, document_ids: Sequence[str] = (), alias: str = "d") -> tuple[list[str], list[Any]]:
    """Conditions on ``documents AS alias`` for what ``access`` may read, within ``document_ids``.

    Public documents, plus owned or granted ones, or everything for SUPER_ADMIN.
    """
    where: list[str] = []
    params: list[Any] = []
    if not access.reads_everything:
        if access.readers:
            marks = ",".join("?" * len(access.readers))
            where.append(
                f"({alias}.access = 'public' OR {alias}.owner_id IN ({marks}) OR EXISTS"
                f" (SELECT 1 FROM grants g WHERE g.document_id = {alias}.document_id AND g.user_id IN ({marks})))"
            )
            params += [*access.readers, *access.readers]
        else:
            where.append(f"{alias}.access = 'public'")
    if document_ids:
        where.append(f"{alias}.document_id IN ({','.join('?' * len(document_ids))})")
        params += list(document_ids)
    return where, params
