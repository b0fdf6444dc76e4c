"""A Query answer within RETRIEVAL_MAX_RESPONSE_BYTES: gRPC clients read 4 MiB by default."""

from __future__ import annotations

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api.convert import CONTEXTS_CAPPED, within_size


def _response(sizes: list[int], **extra: object) -> pb.QueryResponse:
    return pb.QueryResponse(query="q", contexts=[pb.Context(document_id=f"d{i}", content="x" * n) for i, n in enumerate(sizes)], **extra)  # type: ignore[arg-type]


def test_the_last_contexts_go_until_the_answer_fits() -> None:
    # The last: just over, by less than the tag (it overshot by the tag's 25 bytes).
    for sizes, limit in (([10_000] * 10, 45_000), ([100, 200_000, 300], 150_000), ([50, 60, 70, 80] * 30, 1_000), ([30_000, 30_000, 100], 60_030)):
        capped = within_size(_response(sizes), limit)
        kept = len(capped.contexts)
        assert capped.ByteSize() <= limit or kept == 1  # the tag it says included
        assert [c.document_id for c in capped.contexts] == [f"d{i}" for i in range(kept)]
        # The last one left out would not have fit with the tag: no more is dropped than must be.
        assert _response(sizes[: kept + 1]).ByteSize() > limit - len(CONTEXTS_CAPPED) - 3
        assert list(capped.metrics.degraded) == [CONTEXTS_CAPPED]


def test_an_answer_that_fits_is_kept_whole_and_one_that_does_not_keeps_at_least_one_context() -> None:
    small = _response([100, 200])
    assert within_size(small, 10_000) is small and not small.metrics.degraded
    # A written answer's contexts too: the others keep the numbers its text cites them by.
    cited = _response([10_000] * 10, answer=pb.Answer(text="It is [1] and [10].", citations=[pb.Citation(marker=10, document_id="d9")]))
    capped = within_size(cited, 20_000)
    assert [c.document_id for c in capped.contexts] == ["d0"] and capped.answer.citations[0].document_id == "d9"
    assert list(capped.metrics.degraded) == [CONTEXTS_CAPPED]
    huge = _response([500_000])
    assert len(within_size(huge, 100_000).contexts) == 1  # at least one
    assert not huge.metrics.degraded  # and none left out: it says nothing was
    tool = pb.QueryResponse(query="q", answer=pb.Answer(tool_results=[pb.ToolResult(name="lookup_facts", result_json="x" * 200_000)]))
    assert not within_size(tool, 100_000).metrics.degraded


def test_an_answer_too_large_alone_loses_its_last_sentences_whole() -> None:
    """The last resort, with one context left: a model's 7.9 MB answer made a 27 MB response, which
    every default client refused whole. Its text was then cut by bytes: it ended in half a sentence
    or half a marker ("[14…"), and its citations kept the sentences' it no longer had."""
    from retrieval_server.api.convert import ANSWER_CAPPED

    def said(i: int) -> str:
        return f"Sentence {i} is here [{i % 9_999 + 1}]."

    sentences = [pb.AnswerSentence(text=f"Sentence {i} is here.", citations=[i % 9_999 + 1]) for i in range(20_000)]
    citations = [pb.Citation(marker=m, document_id=f"d{m - 1}") for m in range(1, 10_000)]
    big = _response([1_000, 1_000], answer=pb.Answer(text=" ".join(map(said, range(20_000))), sentences=sentences, citations=citations))
    for limit in (100_000, 100_003, 100_007, 60_011):
        capped = within_size(big.__deepcopy__(), limit)
        assert capped.ByteSize() <= limit and [c.document_id for c in capped.contexts] == ["d0"]
        assert list(capped.metrics.degraded) == [CONTEXTS_CAPPED, ANSWER_CAPPED]
        kept = len(capped.answer.sentences)
        assert 0 < kept < 20_000 and [s.text for s in capped.answer.sentences] == [s.text for s in sentences[:kept]]
        assert capped.answer.text == " ".join(map(said, range(kept)))
        assert [c.marker for c in capped.answer.citations] == list(range(1, kept + 1))


def test_an_answer_of_one_long_sentence_is_cut_within_the_limit() -> None:
    """Its one sentence left out, the bytes still to cut reached the whole text: the cut's limit
    fell below the ellipsis and the text was kept whole, the response over the limit while it
    said the answer was capped."""
    from retrieval_server.api.convert import ANSWER_CAPPED

    sentence = "It repeats " + "again and " * 4_000 + "again."
    answer = pb.Answer(text=sentence + " [1]", sentences=[pb.AnswerSentence(text=sentence, citations=[1])],
                       citations=[pb.Citation(marker=1, document_id="d0")])
    capped = within_size(_response([30_000], answer=answer), 65_536)
    assert capped.ByteSize() <= 65_536 and list(capped.metrics.degraded) == [ANSWER_CAPPED]
    [kept] = capped.answer.sentences
    assert kept.text.endswith("…") and sentence.startswith(kept.text.removesuffix("…")) and list(kept.citations) == [1]
    assert capped.answer.text == kept.text + " [1]"  # its citation kept whole


def test_a_text_cut_below_the_ellipsis_keeps_the_limit() -> None:
    from retrieval_server.identifiers import cut_utf8

    assert [cut_utf8("abcdefgh", limit) for limit in (-1, 0, 1, 2, 3, 4, 8)] == ["", "", "a", "ab", "…", "a…", "abcdefgh"]
    assert cut_utf8("ééé", 3) == "…" and cut_utf8("ééé", 1) == ""  # never half a character


def test_an_answer_cut_to_size_is_recorded_as_sent() -> None:
    """The metric and the analytics event count the cut, and the event the contexts sent."""
    from types import SimpleNamespace

    from retrieval_server.api.servicer import RetrievalServicer
    from retrieval_server.domain import Document, Mode, ParentChunk, QueryMetrics, QueryOptions, QueryResult, RetrievedContext
    from retrieval_server.knowledge import Answer, AnswerSentence, Citation, Route
    from retrieval_server.observability.analytics import Analytics

    events: list[object] = []
    observed: list[list[str]] = []
    app = SimpleNamespace(analytics=Analytics(SimpleNamespace(publish=events.append)), pipeline=SimpleNamespace(deps=SimpleNamespace(cache=None)),
                          metrics=SimpleNamespace(observe_query=lambda stages, cached, degraded: observed.append(list(degraded))))
    servicer = object.__new__(RetrievalServicer)  # only what _respond reads
    servicer._app, servicer._s, servicer._cached_contexts = app, SimpleNamespace(max_response_bytes=30_000), None
    contexts = tuple(RetrievedContext(ParentChunk(f"d{i}#p0", f"d{i}", 0, "x" * 10_000, 100), Document(f"d{i}", title=f"T{i}"), 1.0, ())
                     for i in range(5))
    answer = Answer("Tides follow the moon [1].", (AnswerSentence("Tides follow the moon [1].", (1,)),),
                    (Citation(1, "d0#p0", "d0", "T0"),), Route.RETRIEVE, False, True, "m")
    sent = servicer._respond(QueryOptions("tides", 5, mode=Mode.GENERATION), QueryResult("tides", contexts, QueryMetrics(), answer=answer),
                            SimpleNamespace(time_remaining=lambda: None))  # a call still in time
    assert 1 <= len(sent.contexts) < 5 and list(sent.metrics.degraded) == [CONTEXTS_CAPPED]
    assert observed == [[CONTEXTS_CAPPED]]
    [event] = events
    assert event.result_count == len(sent.contexts) and CONTEXTS_CAPPED in event.degraded  # type: ignore[attr-defined]
