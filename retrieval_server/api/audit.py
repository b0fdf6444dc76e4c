"""The audit log: one structured line per admin action (ingest, delete), allowed or refused.

Who (the verified user id, role, and how they were verified; the peer address), what (the RPC,
the documents named, what was stored or deleted), when (the line's timestamp) and the outcome
(OK, or the status code it ended with). Lines go to the ``retrieval_server.audit`` logger, so
operators can route them apart from the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from retrieval_server.api.auth import current_identity
from retrieval_server.api.errors import code_of
from retrieval_server.domain import ServiceError

log = logging.getLogger("retrieval_server.audit")
#: document ids listed in one line; the count says how many there were
MAX_LISTED = 100


@contextlib.contextmanager
def audited(rpc: str, context: grpc.aio.ServicerContext, documents: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Around an admin action; what the action adds to the yielded dict goes into the line."""
    identity = current_identity()
    record: dict[str, Any] = {}
    outcome = "OK"
    try:
        yield record
    except ServiceError as exc:
        outcome = code_of(exc).name
        raise
    except asyncio.CancelledError:
        outcome = "CANCELLED"
        raise
    except Exception:
        outcome = "INTERNAL"
        raise
    finally:
        log.info(
            "admin action",
            extra={
                "audit": True,
                "rpc": rpc,
                "outcome": outcome,
                "user": identity.user_id,
                "role": identity.role.value,
                "verified_by": identity.verified_by,
                "peer": context.peer(),
                "documents": list(documents[:MAX_LISTED]),
                "document_count": len(documents),
                **record,
            },
        )
