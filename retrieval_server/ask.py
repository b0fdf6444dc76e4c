"""`retrieval-server ask`: questions to a running server, answers with citations and an execution trace.

The answer streams in as the server writes it (StreamQuery); then come its citations, the tool
results it used and, with the trace on, every stage with its time and count, the router's
decision, the tool calls and the graph leg's hops, as a tree.

Interactive commands: ``:trace on|off``, ``:strategy NAME``, ``:user ID``, ``:role ROLE``,
``:top-k N``, ``:help``, ``:quit``. Questions are kept in a history file (arrow keys recall them).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient, Tls
from retrieval_server.cli import ROLE_CHOICES, printable, role, top_k_option
from retrieval_server.request_limits import TOP_K_LIMIT

STRATEGIES = ("semantic", "keyword", "hybrid", "adaptive", "graph")
_ROUTE = {pb.ROUTE_RETRIEVE: "retrieve", pb.ROUTE_TOOL: "tool", pb.ROUTE_DIRECT_ANSWER: "direct_answer"}
_MATCH = {pb.ENTITY_MATCH_KIND_EXACT: "exact", pb.ENTITY_MATCH_KIND_CASE_FOLDED: "case-folded", pb.ENTITY_MATCH_KIND_FUZZY: "fuzzy"}
#: ``:top-k N`` read as ``--top-k`` is: past int32 a number was taken, and the next question failed
_top_k = top_k_option(TOP_K_LIMIT, "RETRIEVAL_TOP_K_MAX")
HELP = ":trace on|off   :strategy semantic|keyword|hybrid|adaptive|graph   :user ID   :role ROLE   :top-k N   :help   :quit"


class AnswerConsole(Console):
    """rich's Console, but a reader of stdout that stops reading (| head) is left to cli.main,
    which ends the command with 0 and no message as it ends every other: rich's own way was exit 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # what is still printed (an interactive session's last line) goes nowhere
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def _text(served: str) -> str:
    """A server's string as the console prints it: neither the terminal's control sequences nor rich's markup."""
    return escape(printable(served))


@dataclass
class AskOptions:
    server: str
    user: str | None = None
    role: str | None = None
    strategy: str = "hybrid"
    top_k: int = 5
    trace: bool = False
    token: str | None = None
    tls: Tls | None = None
    #: seconds each question may take (0 or None: no limit)
    timeout: float | None = 60.0


def trace_tree(resp: pb.QueryResponse) -> Tree:
    """Every stage with its time and count; the router's decision, tool calls and graph hops under theirs."""
    m = resp.metrics
    tree = Tree(f"[bold]execution trace[/bold] {m.total_ms:.1f} ms" + (" (cache hit)" if resp.cached else ""))
    placed_graph = False
    for stage in m.stages:
        node = tree.add(f"{_text(stage.stage)}  [cyan]{stage.duration_ms:.1f} ms[/cyan]  count {stage.count}")
        if stage.stage == "route" and m.HasField("route"):
            r = m.route
            node.add(f"decision: [bold]{_ROUTE.get(r.route, '?')}[/bold] by {_text(r.decided_by)}: {_text(r.reason)}")
            for call in r.tool_calls:
                node.add(f"tool call: {_text(call.name)} {_text(call.arguments_json)}")
        if stage.stage == "run_tools" and resp.HasField("answer"):
            for t in resp.answer.tool_results:
                mark = "[green]ok[/green]" if t.success else f"[red]failed[/red]: {_text(t.error)}"
                node.add(f"{_text(t.name)} {_text(t.arguments_json)} {mark} {t.duration_ms:.1f} ms" + (f": {_text(t.summary)}" if t.success else ""))
        if stage.stage == "retrieve" and m.HasField("graph") and not placed_graph:
            placed_graph = True
            g = m.graph
            entities = ", ".join(f"{e.name} ({e.entity_type}, {_MATCH.get(e.kind, '?')} '{e.text}')" for e in g.entities) or "none"
            graph = node.add(f"graph leg: entities in the query: {_text(entities)}")
            for h in g.hops:
                names = ", ".join(h.entities[:8]) + (f" and {len(h.entities) - 8} more" if len(h.entities) > 8 else "")
                graph.add(f"hop {h.hop} ×{h.penalty:.2f}: {_text(names)} → {h.chunks} chunks")
    if m.degraded:
        tree.add("[yellow]degraded:[/yellow] " + _text(", ".join(m.degraded)))
    return tree


def print_answer_details(console: Console, resp: pb.QueryResponse) -> None:
    """Citations, then tool results; the contexts themselves when no answer was asked for."""
    if not resp.HasField("answer"):
        for i, c in enumerate(resp.contexts, 1):
            console.print(f"[{i}] {c.score:.3f} {_text(c.metadata.title or c.document_id)}: {_text(' '.join(c.content.split())[:200])}")
        return
    a = resp.answer
    kind = "extractive" if a.extractive else _text(a.model)
    console.print(f"[dim]({_ROUTE.get(a.route, '?')}, {kind}{'' if a.supported else ', not supported by the documents'})[/dim]")
    for c in a.citations:
        # A context left out to keep the answer within its size (response:contexts_capped) is still cited.
        # Markers count from 1: a marker 0 or below (a server's bug) names no context, and read as an
        # index it printed the last context as the cited text.
        if c.marker < 1:
            text = "(no context of the response has this marker)"
        elif c.marker <= len(resp.contexts):
            text = " ".join(resp.contexts[c.marker - 1].content.split())[:160]
        else:
            text = "(left out of the response)"
        console.print(f"  [{c.marker}] {_text(c.title or c.document_id)} ({_text(c.parent_chunk_id)}): {_text(text)}")
    for t in a.tool_results:
        result = t.summary if t.success else f"failed: {t.error}"
        console.print(f"  tool {_text(t.name)}: {_text(result)}")


def _replaced(final: str, streamed: str) -> bool:
    """Whether the final answer's text replaced the text streamed (or cut it, or took a marker from
    it), rather than rendered it as the server renders every model's text: a model's paragraphs, or
    its "login. [1]", were taken for a replacement, and the same answer printed again."""
    if final == streamed:  # an extractive answer streams as it renders
        return False
    # Imported only here: the workflow's modules (numpy among them) take a second, which no other
    # answer waits for.
    from retrieval_server.workflow.answer import as_checked

    checked, invalid = as_checked(streamed)
    return invalid > 0 or final != checked


class AskSession:
    def __init__(self, options: AskOptions, console: Console, client_factory: Callable[..., RetrievalClient] = RetrievalClient,
                 errors: Console | None = None) -> None:
        self.options = options
        self._console = console
        #: where its errors go (the command's: stderr), apart from the answers a script reads
        self.errors = errors or console
        self._factory = client_factory
        self._client = self._connect()

    def _connect(self) -> RetrievalClient:
        o = self.options
        return self._factory(o.server, user_id=o.user, role=o.role, token=o.token, tls=o.tls, timeout=o.timeout)

    def close(self) -> None:
        self._client.close()

    def ask(self, question: str) -> pb.QueryResponse | None:
        o, console = self.options, self._console
        final: pb.QueryResponse | None = None
        streamed: list[str] = []
        for event in self._client.stream_query(question, top_k=o.top_k, strategy=o.strategy):
            kind = event.WhichOneof("event")
            if kind == "answer_delta":
                console.print(_text(event.answer_delta), end="", soft_wrap=True)
                streamed.append(event.answer_delta)
            elif kind == "response":
                final = event.response
        if streamed:
            console.print()
        if final is None:
            return None
        if final.HasField("answer") and final.answer.text and not streamed:
            console.print(_text(final.answer.text))
        elif final.HasField("answer") and streamed and _replaced(final.answer.text, "".join(streamed)):
            # Only a replacement (the citation check rejected or changed the text, or the model failed
            # part-way): the answer as streamed was printed a second time after every answer.
            console.print(f"[dim]checked:[/dim] {_text(final.answer.text)}")
        print_answer_details(console, final)
        if o.trace:
            console.print(trace_tree(final))
        return final

    def command(self, line: str) -> bool:
        """Apply a ':' command; False when the session should end."""
        name, _, arg = line[1:].strip().partition(" ")
        arg = arg.strip()
        o = self.options
        if name in ("quit", "exit", "q"):
            return False
        # A known command's value it does not take is an error, not the help: ":strategy grpah" went
        # unnoticed, and the next question ran with the strategy before it.
        if name == "trace":
            if arg not in ("on", "off", ""):
                self.errors.print(f"[red]error:[/red] trace must be on, off or nothing (to switch it) (got {_text(arg)})")
                return True
            o.trace = (not o.trace) if not arg else arg == "on"
            self._console.print(f"trace {'on' if o.trace else 'off'}")
        elif name == "strategy":
            if arg.lower() not in STRATEGIES:
                self.errors.print(f"[red]error:[/red] strategy must be one of {', '.join(STRATEGIES)}, in any case (got {_text(arg) or 'nothing'})")
                return True
            o.strategy = arg.lower()
            self._console.print(f"strategy {o.strategy}")
        elif name in ("user", "role"):
            value = (role(arg) if name == "role" else arg) or None
            if name == "role" and value is not None and value not in ROLE_CHOICES:
                self.errors.print(f"[red]error:[/red] role must be one of {', '.join(ROLE_CHOICES)}, in any case (got {_text(arg)})")
                return True
            before = getattr(o, name)
            setattr(o, name, value)
            try:
                client = self._connect()
            except ValueError as exc:  # a user id gRPC metadata cannot carry: the session goes on as before
                setattr(o, name, before)
                self.errors.print(f"[red]error:[/red] {_text(str(exc))}")
                return True
            self._client.close()
            self._client = client
            self._console.print(f"asking as {_text(o.user or 'anonymous')}" + (f" ({o.role})" if o.role else ""))
        elif name == "top-k" and arg:
            try:
                o.top_k = _top_k(arg)
            except argparse.ArgumentTypeError as exc:
                self.errors.print(f"[red]error:[/red] top-k {_text(str(exc))}")
                return True
            self._console.print(f"top-k {o.top_k}")
        else:
            self._console.print(HELP)
        return True


def interactive(session: AskSession, console: Console, history: Path) -> int:
    """The session's exit code: 0, or 1 when its questions came from a script (stdin no terminal)
    and one of them failed, as ``ask QUESTION`` exits; a person at a terminal saw the error."""
    import readline

    try:
        readline.read_history_file(history)
    except OSError:
        pass
    console.print(f"Ask about the indexed documents. {HELP}")
    failed = False
    try:
        while True:
            try:
                line = input("ask> ").strip()
            except EOFError:
                console.print()
                break
            if not line:
                continue
            if line.startswith(":"):
                if not session.command(line):
                    break
                continue
            try:
                session.ask(line)
            except BrokenPipeError:
                raise  # nobody reads the answers any more
            except Exception as exc:  # a failed call (server down, bad argument) must not end the session
                failed = True
                session.errors.print(f"[red]error:[/red] {_text(_describe(exc))}")
    finally:
        try:
            history.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history)
        except OSError:
            pass
    return 1 if failed and not sys.stdin.isatty() else 0


def _describe(exc: Exception) -> str:
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {details()}"
    return str(exc)
