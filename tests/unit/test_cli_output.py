"""What the client commands print of a server's answer (a stand-in client; no server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import retrieval_client
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server import cli
from tests.support.fake_client import FakeClient

#: a document's text holding what a terminal obeys: clear the screen, set the window title, colour,
#: write the clipboard (OSC 52), and a C1 control sequence introducer
TITLE = "Quarterly \x1b[2J\x1b]0;owned\x07 report"
TEXT = "Zeppelin budget \x1b[31mRED\x1b[0m numbers \x1b]52;c;ZWNobyBoaQ==\x07 end \x9b2J"
ANSWER = "The budget is \x1b[31mRED\x1b[0m [1]."
REASON = "names known entities: Zeppelin"


def _query() -> pb.QueryResponse:
    r = pb.QueryResponse(query="zeppelin")
    c = r.contexts.add(parent_chunk_id="esc1#p0", document_id="esc1", content=TEXT, score=0.5)
    c.metadata.title = TITLE
    c.child_chunks.add(chunk_id="esc1#c0", content=TEXT, score=0.5)
    r.metrics.stages.add(stage="retrieve", duration_ms=1.0, count=1)
    r.metrics.degraded.append("rerank:\x1b[2J")
    return r


def _answer() -> pb.QueryResponse:
    r = _query()
    r.answer.text = ANSWER
    r.answer.model = "openai:\x1b]0;model\x07"
    r.answer.citations.add(marker=1, parent_chunk_id="esc1#p0", document_id="esc1", title=TITLE)
    r.answer.tool_results.add(name="calc\x1b[2J", success=True, summary=TEXT)
    r.metrics.stages.add(stage="route", duration_ms=1.0)
    r.metrics.route.route = pb.ROUTE_RETRIEVE
    r.metrics.route.decided_by = "rules"
    r.metrics.route.reason = REASON
    return r


class Client(FakeClient):
    """retrieval_client.RetrievalClient as the commands use it, answering with the documents above."""

    def query(self, text: str, **_: Any) -> pb.QueryResponse:
        return _query()

    def search(self, text: str, **_: Any) -> pb.SearchResponse:
        r = pb.SearchResponse(query=text)
        r.results.add(text=TEXT, document_id="esc1", title=TITLE, score=0.5)
        return r

    def stream_query(self, question: str, **_: Any) -> Iterator[pb.StreamQueryResponse]:
        words = ANSWER.split(" ")
        for i, word in enumerate(words):
            yield pb.StreamQueryResponse(answer_delta=word if i == len(words) - 1 else word + " ")
        yield pb.StreamQueryResponse(response=_answer())


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval_server.ask import AskSession

    monkeypatch.setattr(retrieval_client, "RetrievalClient", Client)
    monkeypatch.setattr(AskSession, "_connect", lambda self: Client())


@pytest.mark.parametrize("argv", [["query", "zeppelin"], ["search", "zeppelin"], ["ask", "zeppelin", "--trace"]])
def test_a_documents_terminal_controls_are_printed_escaped(argv: list[str], client: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A document holding ESC [2J cleared the screen of whoever searched for it; OSC 52 wrote their clipboard."""
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert r"Quarterly \x1b[2J\x1b]0;owned\x07 report" in out and r"\x1b]52;c;ZWNobyBoaQ==\x07 end \x9b2J" in out


@pytest.mark.parametrize("argv", [["query", "zeppelin"], ["search", "zeppelin"], ["ask", "zeppelin"]])
def test_json_output_carries_the_text_as_it_is(argv: list[str], client: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    contexts = printed["contexts"] if "contexts" in printed else printed["results"]
    assert (contexts[0].get("metadata") or contexts[0])["title"] == TITLE


def test_a_servers_error_is_printed_escaped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import grpc

    class Refused(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.INVALID_ARGUMENT

        def details(self) -> str:
            return "no document '\x1b]0;owned\x07'"

    def refusing(*_: object, **__: object) -> pb.QueryResponse:
        raise Refused

    monkeypatch.setattr(Client, "search", refusing)
    monkeypatch.setattr(retrieval_client, "RetrievalClient", Client)
    assert cli.main(["search", "x"]) == 1
    assert capsys.readouterr().err == "error: INVALID_ARGUMENT: no document '\\x1b]0;owned\\x07'\n"


def test_printable_keeps_text_and_white_space() -> None:
    # Joiners and the soft hyphen are text: emoji sequences, Persian's می‌خواهم, Devanagari's क्‍ष.
    for kept in ("plain", "Zürich 東京 naïve", "two\nlines\tand\u00a0a no-break space", "👩\u200d💻 👨\u200d👩\u200d👧",
                 "می\u200cخواهم", "क्\u200dष", "co\u00adoperate", "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"):
        assert cli.printable(kept) == kept
    assert cli.printable("a\rb\u202ec\x00\x9b\u2066") == r"a\rb\u202ec\x00\x9b\u2066"


def test_query_prints_the_suggestions_of_an_empty_answer(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty answer comes with suggestions (related titles, hints), which only --json printed."""

    class Empty(Client):
        def query(self, text: str, **_: Any) -> pb.QueryResponse:
            return pb.QueryResponse(query=text, suggestions=["Rank fusion", "a \x1b[2J title"])

    monkeypatch.setattr(retrieval_client, "RetrievalClient", Empty)
    assert cli.main(["query", "The Who"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [r"suggestions: Rank fusion; a \x1b[2J title"]


def test_search_says_how_many_results_the_answer_left_out(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Past RETRIEVAL_MAX_RESPONSE_BYTES a Search answer lists fewer results than were found: the
    command said nothing, and fewer lines than --top-k read as all there was."""

    class Capped(Client):
        def search(self, text: str, **_: Any) -> pb.SearchResponse:
            r = pb.SearchResponse(query=text, results_not_listed=37)
            r.results.add(text="Tides.", document_id="t1", title="Tides", score=0.5)
            return r

    monkeypatch.setattr(retrieval_client, "RetrievalClient", Capped)
    assert cli.main(["search", "tides", "--top-k", "38"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "37 more results not listed: the answer holds at most RETRIEVAL_MAX_RESPONSE_BYTES"


def test_delete_json_lists_ids_holding_commas_and_dashes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The only output was "deleted: a, b, -; not found: -", which no script could split back into ids."""

    class Deleting(Client):
        def delete(self, document_ids: list[str], **_: Any) -> pb.DeleteDocumentsResponse:
            return pb.DeleteDocumentsResponse(deleted=document_ids[:2], not_found=document_ids[2:])

    monkeypatch.setattr(retrieval_client, "RetrievalClient", Deleting)
    assert cli.main(["delete", "a, b", "-", "c", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": ["a, b", "-"], "not_found": ["c"]}
    assert cli.main(["delete", "a, b", "-"]) == 0
    assert capsys.readouterr().out == "deleted: a, b, -; not found: -\n"


def test_ask_into_a_pipe_writes_each_line_whole(client: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Not a terminal, rich wrapped at 80 columns: newlines and trailing spaces inside the answer and its citations."""
    long = "The budget covers " + ", ".join(f"item {i}" for i in range(60)) + " [1]."
    monkeypatch.setattr("tests.unit.test_cli_output.ANSWER", long)
    monkeypatch.setattr("tests.unit.test_cli_output.TITLE", "A title " + "long " * 30)
    reason = "names known entities: " + ", ".join(f"Entity number {i}" for i in range(20))
    monkeypatch.setattr("tests.unit.test_cli_output.REASON", reason)
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli.main(["ask", "zeppelin", "--trace"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert long in lines
    assert any(line.startswith("  [1] A title " + "long " * 30) for line in lines)
    # The trace is a tree, which rich lays out to the console's width: its lines were cut at 80.
    assert any(line.endswith(f"decision: retrieve by rules: {reason}") for line in lines)
    assert not [line for line in lines if line != line.rstrip()]


#: a model's text as it streams: paragraphs, a citation after the stop, two in one bracket
WRITTEN = "The budget is 42 units.\n\nIt was set in March. [1] Finance and ops approved it [1, 3]."


@pytest.mark.parametrize(
    ("streamed", "final", "checked"),
    [
        (ANSWER, ANSWER, False),  # an extractive answer streams as it renders
        # A model's text as the server renders it: the same answer
        (WRITTEN, "The budget is 42 units. It was set in March [1]. Finance and ops approved it [1] [3].", False),
        (WRITTEN, "Replaced by the citation check [1].", True),
        # The check removed a marker that pointed nowhere: what was printed had it
        (WRITTEN, "The budget is 42 units. It was set in March [1]. Finance and ops approved it [1].", True),
        # ... a marker that points nowhere whatever the contexts: rendered alike, it was taken out
        ("Login works [1]. Tokens expire after an hour [0].", "Login works [1]. Tokens expire after an hour.", True),
        # A last sentence cut short (answer:truncated), or NOT_ANSWERABLE, is replaced
        ("The budget is 42 units [1]. It was se", "The budget is 42 units [1].", True),
        ("NOT_ANSWERABLE", "The documents I can read do not answer this question.", True),
    ],
    ids=["extractive", "model-rendered", "replaced", "marker-removed", "marker-0-removed", "cut", "not-answerable"],
)
def test_ask_prints_the_checked_answer_only_when_it_replaced_the_streamed_one(
    streamed: str, final: str, checked: bool, client: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The streamed answer was printed a second time after "checked:" when nothing had replaced it:
    every model's text, which the server renders on one line with its markers before the stop."""

    def streaming(self: Client, question: str, **_: Any) -> Iterator[pb.StreamQueryResponse]:
        yield pb.StreamQueryResponse(answer_delta=streamed[:14])
        yield pb.StreamQueryResponse(answer_delta=streamed[14:])
        response = _answer()
        response.answer.text = final
        yield pb.StreamQueryResponse(response=response)

    monkeypatch.setattr(Client, "stream_query", streaming)
    assert cli.main(["ask", "zeppelin"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(cli.printable(streamed) + "\n")
    assert [line for line in out.splitlines() if line.startswith("checked:")] == ([f"checked: {final}"] if checked else [])
