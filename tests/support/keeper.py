"""One document, "keeper", in a public and a private version that share their first sentence:
what a caller may not read is the second one (``hunter2-SECRET``)."""

from __future__ import annotations

from retrieval_server.domain import DocumentSource

PUBLIC = "The Ledger Keeper service uses LedgerDB. Ledger Keeper stores the quarterly keys."
SECRET = "The Ledger Keeper service uses LedgerDB. Ledger Keeper keeps the root password hunter2-SECRET."


def keeper(text: str, **access: object) -> DocumentSource:
    return DocumentSource(filename="keeper.txt", content=text.encode(), document_id="keeper", **access)  # type: ignore[arg-type]
