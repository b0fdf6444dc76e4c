"""The audit log: one structured line per admin action (ingest, delete), allowed or refused.

Who (the verified user id, role, and how they were verified; the peer address), what (the RPC,
the documents named, what was stored or deleted), when (the line's timestamp) and the outcome
(OK, or the status code it ended with). Lines go to the ``retrieval_server.audit`` logger, so
operators can route them apart from the rest. A call refused before its caller is known (its
credentials, or a request too heavy to read or not a valid message, not sent in time or at all,
or past its address's share of the calls) is an attempted admin action too: :func:`refused`
writes its line, with no user (none was proven) and the refusal's reason. So is one its deadline
or its caller's cancel ended before the servicer ran (while its message was awaited, or its token
waited for the identity provider's keys): :func:`cut_short` writes its line, with the identity
if it was known by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from retrieval_server.api.auth import SERVICE_PREFIX, current_identity
from retrieval_server.api.errors import code_of, reason_of
from retrieval_server.domain import ServiceError
from retrieval_server.observability.grpc_metrics import cancelled_code

log = logging.getLogger("retrieval_server.audit")
#: document ids listed in one line; the count says how many there were
MAX_LISTED = 100
#: characters of each listed id (or file name): a longer one is cut, ends in "…", and its list's
#: ``<name>_truncated`` says so. A refused caller's ids are never validated: a 40 MB id made a
#: 40 MB line.
MAX_LISTED_CHARS = 256
#: the admin RPCs (their full gRPC method names)
AUDITED_METHODS = frozenset(f"{SERVICE_PREFIX}{rpc}" for rpc in ("IngestDocuments", "DeleteDocuments"))
#: the context of the call whose line :func:`audited` or :func:`refused` wrote (or will write), in
#: that call's task: :func:`cut_short` then writes none, each call having one line. Its context,
#: not a flag: a task inherits its creator's variables.
_told: contextvars.ContextVar[grpc.aio.ServicerContext | None] = contextvars.ContextVar("retrieval_audit_told", default=None)


def _write(rpc: str, outcome: str, peer: str, documents: Sequence[str], *, user: str | None = "",
           role: str = "", verified_by: str = "", **extra: Any) -> None:
    """One line, the same shape for every admin action."""
    listed, truncated = _cut(documents)
    log.info(
        "admin action",
        extra={
            "audit": True,
            "rpc": rpc,
            "outcome": outcome,
            "user": user,
            "role": role,
            "verified_by": verified_by,
            "peer": peer,
            "documents": listed,
            "document_count": len(documents),
            "documents_truncated": truncated,
            **_listed(extra),
        },
    )


def _cut(values: Sequence[Any]) -> tuple[list[Any], bool]:
    """The first :data:`MAX_LISTED` of ``values``, each string held to :data:`MAX_LISTED_CHARS`
    characters, and whether any was cut."""
    listed, truncated = [], False
    for value in values[:MAX_LISTED]:
        if isinstance(value, str) and len(value) > MAX_LISTED_CHARS:
            value, truncated = value[:MAX_LISTED_CHARS] + "…", True
        listed.append(value)
    return listed, truncated


def _listed(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with each list cut as :func:`_cut` does, counted in ``<name>_count`` and flagged
    in ``<name>_truncated``: a JSONL file's ingest stored a document per row, and its line listed
    every id (megabytes)."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, list):
            out[name], out[f"{name}_truncated"] = _cut(value)
            out[f"{name}_count"] = len(value)
        else:
            out[name] = value
    return out


@contextlib.contextmanager
def audited(rpc: str, context: grpc.aio.ServicerContext, documents: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Around an admin action; what the action adds to the yielded dict goes into the line."""
    identity = current_identity()
    _told.set(context)
    # Read before the action: once grpc.aio has expired a call's deadline, its context names no peer.
    peer = context.peer()
    record: dict[str, Any] = {}
    outcome = "OK"
    try:
        yield record
    except ServiceError as exc:
        outcome = code_of(exc).name
        raise
    except asyncio.CancelledError:
        outcome = cancelled_code(context).name
        raise
    except Exception:
        outcome = "INTERNAL"
        raise
    finally:
        _write(rpc, outcome, peer, documents, user=identity.user_id, role=identity.role.value, verified_by=identity.verified_by,
               **record)


def refused(method: str, context: grpc.aio.ServicerContext, exc: ServiceError) -> None:
    """The line of an admin RPC refused before its caller was known (missing, invalid or expired
    credentials; a peer that may not speak for users; a request too heavy to read, or not a valid
    message; a message not sent in time or at all; a call past its address's share). Its request
    was never read, so the line names no documents."""
    if method in AUDITED_METHODS:
        _told.set(context)
        _write(method.removeprefix(SERVICE_PREFIX), code_of(exc).name, context.peer(), (), reason=reason_of(exc))


def cut_short(method: str, context: grpc.aio.ServicerContext, peer: str) -> None:
    """The line of an admin RPC its deadline or its caller's cancel ended before any line was
    written for it: while its message was awaited, or its token waited for the identity provider's
    keys (a cold start's first JWKS fetch). Its outcome is the code its caller and the metrics see
    (DEADLINE_EXCEEDED or CANCELLED); ``peer`` was read as the call came (grpc.aio names none once
    the deadline has passed); the user, role and how they were verified only if that was done."""
    if method not in AUDITED_METHODS or _told.get() is context:
        return
    try:
        identity = current_identity()
    except LookupError:  # cut before its caller was verified: none was proven
        identity = None
    _write(method.removeprefix(SERVICE_PREFIX), cancelled_code(context).name, peer, (),
           **({"user": identity.user_id, "role": identity.role.value, "verified_by": identity.verified_by} if identity else {}))
