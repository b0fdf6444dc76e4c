"""What `retrieval-server ask` prints of an answer: citations whatever the response left out, ids as written."""

from __future__ import annotations

import io

from rich.console import Console

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.ask import print_answer_details


def _printed(response: pb.QueryResponse) -> str:
    out = io.StringIO()
    print_answer_details(Console(file=out, width=200), response)
    return out.getvalue()


def _answer(doc_ids: list[str], contexts: int) -> pb.QueryResponse:
    r = pb.QueryResponse(query="q")
    for d in doc_ids[:contexts]:
        r.contexts.add(parent_chunk_id=f"{d}#p0", document_id=d, content=f"What {d} says.")
    r.answer.text = " ".join(f"Claim [{i}]." for i in range(1, len(doc_ids) + 1))
    for i, d in enumerate(doc_ids, 1):
        r.answer.citations.add(marker=i, parent_chunk_id=f"{d}#p0", document_id=d, title=f"T {d}")
    return r


def test_a_citation_of_a_context_left_out_for_size_is_printed() -> None:
    # The response may leave its last contexts out (response:contexts_capped), still cited: IndexError.
    printed = _printed(_answer(["d1", "d2"], contexts=1))
    assert "[1] T d1 (d1#p0): What d1 says." in printed and "[2] T d2 (d2#p0): (left out of the response)" in printed


def test_document_ids_are_printed_as_written_not_read_as_markup() -> None:
    # "[/draft]" raised MarkupError; "[bold]" was swallowed as a style.
    printed = _printed(_answer(["notes[/draft]", "spec[bold]"], contexts=2))
    assert "(notes[/draft]#p0)" in printed and "(spec[bold]#p0)" in printed
