"""What `retrieval-server ask` prints of an answer: citations whatever the response left out, ids as written; its session's commands."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient
from retrieval_server.ask import AskOptions, AskSession, interactive, print_answer_details
from retrieval_server.request_limits import TOP_K_LIMIT
from tests.support.fake_client import FakeClient


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


@pytest.mark.parametrize("marker", [0, -1])
def test_a_citation_marker_below_1_names_no_context(marker: int) -> None:
    # Checked only against its upper bound, marker 0 printed contexts[-1], the last context, as the cited text.
    response = _answer(["d1", "d2"], contexts=2)
    response.answer.citations[1].marker = marker
    printed = _printed(response)
    assert "What d2 says." not in printed
    assert f"[{marker}] T d2 (d2#p0): (no context of the response has this marker)" in printed
    assert "[1] T d1 (d1#p0): What d1 says." in printed


def test_document_ids_are_printed_as_written_not_read_as_markup() -> None:
    # "[/draft]" raised MarkupError; "[bold]" was swallowed as a style.
    printed = _printed(_answer(["notes[/draft]", "spec[bold]"], contexts=2))
    assert "(notes[/draft]#p0)" in printed and "(spec[bold]#p0)" in printed


def test_a_user_id_the_client_refuses_leaves_the_session_asking_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """":user zoë" closed the client, then the new one's refusal (not ASCII) ended the whole session."""
    made: list[Recorded] = []
    closed: list[Recorded] = []

    class Recorded(RetrievalClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

        def close(self) -> None:
            closed.append(self)
            super().close()

    out = io.StringIO()
    console = Console(file=out, width=200)
    session = AskSession(AskOptions("127.0.0.1:1", user="alice"), console, Recorded)
    lines = iter([":user zoë", ":role ADMIN", ":quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert interactive(session, console, tmp_path / "history") == 0
    printed = out.getvalue()
    assert "error: the user id must be printable ASCII" in printed and "asking as alice (ADMIN)" in printed
    assert session.options.user == "alice" and len(made) == 2 and closed == [made[0]]
    session.close()


def test_a_top_k_out_of_range_is_refused_as_the_option_is_and_the_session_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """":top-k 3000000000" was taken, and the next question failed with the client's int32 ValueError."""
    out = io.StringIO()
    console = Console(file=out, width=200)
    session = AskSession(AskOptions("127.0.0.1:1", top_k=5), console)
    lines = iter([":top-k 3000000000", ":top-k many", ":top-k 7", ":quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert interactive(session, console, tmp_path / "history") == 0
    printed = out.getvalue()
    assert f"error: top-k must be 0 (the server's default) to {TOP_K_LIMIT}, the most RETRIEVAL_TOP_K_MAX allows (got 3000000000)" in printed
    assert "(got many)" in printed and "top-k 7" in printed
    assert session.options.top_k == 7
    session.close()


def test_a_role_is_taken_in_any_case_and_one_the_server_has_not_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server takes x-user-role exactly, upper case: ":role admin" was sent as typed, and every question refused."""
    out = io.StringIO()
    console = Console(file=out, width=200)
    session = AskSession(AskOptions("127.0.0.1:1", user="alice"), console)
    lines = iter([":role admin", ":role root", ":quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert interactive(session, console, tmp_path / "history") == 0
    printed = out.getvalue()
    assert "asking as alice (ADMIN)" in printed and "error: role must be one of USER, ADMIN, SUPER_ADMIN, in any case (got root)" in printed
    assert session.options.role == "ADMIN"
    session.close()


def test_a_strategy_or_trace_value_not_taken_is_an_error_and_only_an_unknown_command_prints_the_help(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """":strategy grpah" printed the help on stdout, nothing on stderr, and the next question ran with
    the strategy before it."""
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=out, width=200)
    session = AskSession(AskOptions("127.0.0.1:1", strategy="keyword"), console, errors=Console(file=err, width=200))
    lines = iter([":strategy grpah", ":strategy", ":trace maybe", ":strategy GRAPH", ":trace", ":bogus", ":quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert interactive(session, console, tmp_path / "history") == 0
    assert err.getvalue().splitlines() == [
        "error: strategy must be one of semantic, keyword, hybrid, adaptive, graph, in any case (got grpah)",
        "error: strategy must be one of semantic, keyword, hybrid, adaptive, graph, in any case (got nothing)",
        "error: trace must be on, off or nothing (to switch it) (got maybe)",
    ]
    printed = out.getvalue()
    assert "strategy graph\n" in printed and "trace on\n" in printed
    assert printed.count(":trace on|off") == 2  # the greeting's, and :bogus's
    assert session.options.strategy == "graph" and session.options.trace
    session.close()


def test_a_user_id_is_printed_as_written_not_read_as_markup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """":user [/x]" ended the session with rich's MarkupError; ":user [bold]al" printed "asking as al"."""
    out = io.StringIO()
    console = Console(file=out, width=200)
    session = AskSession(AskOptions("127.0.0.1:1"), console)
    lines = iter([":user [/x]", ":user [bold]al", ":quit"])
    monkeypatch.setattr("builtins.input", lambda _prompt="": next(lines))
    assert interactive(session, console, tmp_path / "history") == 0
    printed = out.getvalue()
    assert "asking as [/x]\n" in printed and "asking as [bold]al\n" in printed
    assert session.options.user == "[bold]al"
    session.close()


@pytest.mark.parametrize("terminal", [False, True])
def test_a_failed_question_goes_to_stderr_and_fails_a_scripted_session(terminal: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`printf 'hello\\n' | retrieval-server ask` against a server that is down exited 0, its error on
    stdout with the answers: a script saw a success. At a terminal the session still ends with 0."""
    import grpc

    from retrieval_server import cli

    class Down(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAVAILABLE

        def details(self) -> str:
            return "failed to connect to all addresses"

    class Client(FakeClient):
        def stream_query(self, question: str, **_: Any) -> Any:
            raise Down

    monkeypatch.setattr(AskSession, "_connect", lambda self: Client())
    monkeypatch.setattr("sys.stdin.isatty", lambda: terminal)
    lines = iter(["hello", ":top-k many"])

    def read(_prompt: str = "") -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", read)
    assert cli.main(["ask", "--history", str(tmp_path / "history")]) == (0 if terminal else 1)
    out, err = capsys.readouterr()
    assert "error" not in out
    assert "error: UNAVAILABLE: failed to connect to all addresses\n" in err and "error: top-k must be" in err
