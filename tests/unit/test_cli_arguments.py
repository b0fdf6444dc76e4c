"""The CLI's arguments and errors, spelled out so that client commands need not import the domain, agree with it."""

from __future__ import annotations

import argparse
import os
import socket

import pytest

from retrieval_server import cli
from retrieval_server.config import bind_error, listen_address, load_settings
from retrieval_server.domain import Access, NotFound, Role, Strategy
from retrieval_server.supervisor import hold_port


def test_the_access_strategy_and_role_choices_are_the_domains_values() -> None:
    assert sorted(cli.ACCESS_CHOICES) == sorted(a.value for a in Access)
    assert sorted(cli.STRATEGY_CHOICES) == sorted(s.value for s in Strategy)
    assert sorted(cli.ROLE_CHOICES) == sorted(r.value for r in Role if r is not Role.ANONYMOUS)


@pytest.mark.parametrize("argv", [["search", "x"], ["query", "x"], ["ask", "x"], ["ingest", "a.txt"], ["delete", "a"], ["health"]])
def test_a_role_is_taken_in_any_case_and_sent_as_the_server_reads_it(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The server takes x-user-role exactly, upper case: ``--role admin`` was sent as typed and refused, INVALID_ARGUMENT."""
    roles: list[str] = []

    def sent(args: argparse.Namespace) -> int:
        roles.append(args.role)
        return 0

    for command in ("_remote", "_ask", "_ingest_remote"):
        monkeypatch.setattr(cli, command, sent)
    assert cli.main([*argv, "--role", "admin"]) == 0 and cli.main([*argv, "--role", "Super_Admin"]) == 0
    assert roles == ["ADMIN", "SUPER_ADMIN"]
    with pytest.raises(SystemExit) as stopped:
        cli.main([*argv, "--role", "root"])
    assert stopped.value.code == 2 and "argument --role: invalid choice: 'ROOT' (choose from" in capsys.readouterr().err


@pytest.mark.parametrize(("error", "line"), [
    (NotFound("no such document: x"), "error: no such document: x"),  # a ServiceError: its message alone
    (KeyError("field"), "error: health failed: KeyError: 'field'"),  # anything else: the command named
])
def test_a_failed_command_prints_one_line_and_exits_with_1(
    error: Exception, line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise error

    monkeypatch.setattr(cli, "_remote", failing)
    assert cli.main(["health"]) == 1
    assert capsys.readouterr().err == line + "\n"


@pytest.mark.parametrize("text", ["inf", "nan", "-1", "1e10"])
def test_a_timeout_gRPC_cannot_hold_is_refused(text: str) -> None:
    # 1e10 s and inf overflowed the deadline: every call failed at once with DEADLINE_EXCEEDED.
    with pytest.raises(argparse.ArgumentTypeError, match="must be 0 to 1e"):
        cli.seconds(text)
    assert cli.seconds("0") == 0 and cli.seconds("1e9") == 1e9
    with pytest.raises(SystemExit):
        cli.main(["search", "x", "--timeout", text])


@pytest.mark.parametrize(("argv", "limit"), [
    (["query", "x", "--top-k", "3000000000"], "0 (the server's default) to 10000, the most RETRIEVAL_TOP_K_MAX allows (got 3000000000)"),
    (["query", "x", "--top-k", "-1"], "0 (the server's default) to 10000, the most RETRIEVAL_TOP_K_MAX allows (got -1)"),
    (["search", "x", "--top-k", "1001"], "0 (the server's default) to 1000, the most RETRIEVAL_SEARCH_TOP_K_MAX allows (got 1001)"),
    (["ask", "x", "--top-k", "10001"], "0 (the server's default) to 10000, the most RETRIEVAL_TOP_K_MAX allows (got 10001)"),
    (["query", "x", "--top-k", "five"], "0 (the server's default) to 10000, the most RETRIEVAL_TOP_K_MAX allows (got five)"),
])
def test_a_top_k_no_server_takes_is_a_usage_error_naming_the_limit(
    argv: list[str], limit: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """3000000000 was sent for, and failed as the client's ValueError: "query failed: ValueError:
    top_k must be an integer from -2147483648 to 2147483647", with exit 1."""

    def sent(args: argparse.Namespace) -> int:
        pytest.fail(f"{argv[0]} was sent with top_k {args.top_k}")

    monkeypatch.setattr(cli, "_remote", sent)
    monkeypatch.setattr(cli, "_ask", sent)
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2 and f"argument --top-k: must be {limit}" in capsys.readouterr().err


def test_the_top_k_limits_are_the_settings_bounds() -> None:
    from retrieval_server.config import ConfigError
    from retrieval_server.request_limits import SEARCH_TOP_K_LIMIT, TOP_K_LIMIT

    assert load_settings(top_k_max=TOP_K_LIMIT, search_top_k_max=SEARCH_TOP_K_LIMIT).top_k_max == TOP_K_LIMIT
    for too_many in ({"top_k_max": TOP_K_LIMIT + 1}, {"search_top_k_max": SEARCH_TOP_K_LIMIT + 1}):
        with pytest.raises(ConfigError):
            load_settings(**too_many)


def test_ctrl_c_lists_what_was_stored_and_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        with cli._listed_if_stopped([("tides", 1, 2, "added")], []):
            raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_ingest_remote", interrupted)
    assert cli.main(["ingest", "somewhere"]) == 1
    out, err = capsys.readouterr()
    assert "tides" in out and err.strip().splitlines()[-1] == "error: ingest interrupted" and "Traceback" not in err


def test_a_port_left_in_time_wait_by_the_last_run_can_be_held_again() -> None:
    """A stopping server closes its clients' connections first; its side waits a minute in
    TIME_WAIT, and the supervisor's bind (without SO_REUSEADDR) failed: "address already in use"."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the server's side first
    assert client.recv(1) == b""  # its FIN has arrived
    client.close()
    listener.close()
    for guard in hold_port("127.0.0.1", port):
        guard.close()


def test_a_held_port_refuses_another_supervisor_and_a_single_server() -> None:
    [held] = hold_port("127.0.0.1", 0)
    port = held.getsockname()[1]
    try:
        with pytest.raises(OSError, match="address already in use"):
            hold_port("127.0.0.1", port)
        with socket.socket() as single:  # as gRPC binds one process: SO_REUSEADDR, no SO_REUSEPORT
            single.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError):
                single.bind(("127.0.0.1", port))
    finally:
        held.close()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback")
def test_every_address_of_localhost_is_held_as_grpc_listens_on_each() -> None:
    """gRPC binds localhost's two loopback addresses and serves once one binds: the supervisor held
    only the first, so a server could take [::1] of its port and share its clients."""
    held = hold_port("localhost", 0)
    port = held[0].getsockname()[1]
    try:
        assert sorted(g.getsockname()[0] for g in held) == ["127.0.0.1", "::1"]
        with socket.socket(socket.AF_INET6) as single:
            single.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError):
                single.bind(("::1", port))
    finally:
        for guard in held:
            guard.close()


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback")
def test_localhost_is_in_use_when_any_of_its_addresses_is() -> None:
    for taken in ("127.0.0.1", "::1"):
        with socket.create_server((taken, 0), family=socket.AF_INET6 if ":" in taken else socket.AF_INET) as other:
            port = other.getsockname()[1]
            assert bind_error("localhost", port) == "address already in use"
            with pytest.raises(OSError, match="address already in use"):
                hold_port("localhost", port)
    assert bind_error("localhost", port) is None


def test_an_ipv6_listen_address_is_taken_bare_or_in_brackets() -> None:
    for host in ("::1", "[::1]"):
        s = load_settings(host=host, metrics_enabled=False)
        assert s.host == "::1" and listen_address(s.host, 50051) == "[::1]:50051"
    assert listen_address("127.0.0.1", 1) == "127.0.0.1:1"


def test_a_document_id_for_several_files_is_refused_before_anything_is_sent(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    for name in ("a.txt", "b.txt", "rows.jsonl"):
        (folder / name).write_text("text")
    sent: list[object] = []
    monkeypatch.setattr(cli, "_ingest_remote", lambda args: sent.append(args) or 0)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["ingest", "--document-id", "handbook", str(folder / "a.txt"), str(folder / "b.txt")])
    assert stopped.value.code == 2 and "--document-id names one file; 2 were given" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["ingest", "--document-id", "handbook", str(folder)])
    # A file of rows alone: each row kept its own _id, the option taken without a word.
    with pytest.raises(SystemExit) as stopped:
        cli.main(["ingest", "--document-id", "handbook", str(folder / "rows.jsonl")])
    assert stopped.value.code == 2
    assert f"--document-id applies to a file that is not JSONL: each row of {folder / 'rows.jsonl'} has its own id (_id)" in capsys.readouterr().err
    assert not sent
    # One file, beside files of rows that carry their own ids, is what the option is for.
    assert cli.main(["ingest", "--document-id", "handbook", str(folder / "a.txt"), str(folder / "rows.jsonl")]) == 0 and len(sent) == 1


def test_a_malformed_meta_pair_is_a_usage_error_before_the_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It was found at the first file: after the run's report ("0 documents indexed"), with exit 1,
    and after --local had loaded the model."""
    sent: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_ingest_remote", lambda args: sent.append(args) or 0)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["ingest", "notes.md", "--meta", "team=search", "--meta", "foo"])
    assert stopped.value.code == 2 and "argument --meta: expects key=value, got 'foo'" in capsys.readouterr().err
    assert not sent
    assert cli.main(["ingest", "notes.md", "--meta", "team=search", "--meta", "q=a=b"]) == 0
    assert dict(sent[0].meta) == {"team": "search", "q": "a=b"}


def test_a_token_for_a_remote_plaintext_server_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The client's refusal read as a failed query, with advice for the Python API (tls=Tls(...))."""
    called: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_remote", lambda args: called.append(args) or 0)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["query", "x", "--token", "abc", "--server", "10.0.0.1:50051"])
    assert stopped.value.code == 2 and "--token needs --tls (or a loopback --server)" in capsys.readouterr().err
    monkeypatch.setenv("RETRIEVAL_TOKEN", "abc")  # the same token, from the environment
    with pytest.raises(SystemExit):
        cli.main(["search", "x", "--server", "retrieval.example:50051"])
    # Read as loopback from the text after the last "/", which gRPC drops: the token went to 192.0.2.2.
    for remote in ("dns:///192.0.2.2:50051?x=/127.0.0.1", "ipv4:192.0.2.2:50051#/localhost", "ipv4:127.0.0.1:1,192.0.2.2:50051"):
        with pytest.raises(SystemExit):
            cli.main(["health", "--server", remote])
    assert not called
    for allowed in (["--server", "localhost:50051"], ["--server", "[::1]:50051"], ["--server", "10.0.0.1:50051", "--tls"],
                    ["--server", "10.0.0.1:50051", "--tls-ca", "ca.pem"], ["--server", "ipv4:127.0.0.1:1,127.0.0.2:1"],
                    ["--server", "unix:/run/retrieval.sock"]):
        assert cli.main(["query", "x", *allowed]) == 0
    assert len(called) == 6


def test_a_grant_on_a_public_document_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--access defaults to public, which every caller reads: the grant was stored and meant nothing."""
    sent: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_ingest_remote", lambda args: sent.append(args) or 0)
    for access in ([], ["--access", "public"]):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["ingest", "notes.md", "--owner", "alice", "--grant", "bob", *access])
        assert stopped.value.code == 2 and "--grant needs --access private" in capsys.readouterr().err
    assert not sent
    assert cli.main(["ingest", "notes.md", "--access", "private", "--owner", "alice", "--grant", "bob"]) == 0 and len(sent) == 1


def test_a_private_document_without_an_owner_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Every file was sent and refused alone (40 files, 40 FAILED, exit 1), as the server stores no private document without its owner."""
    sent: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_ingest_remote", lambda args: sent.append(args) or 0)
    for owner in ([], ["--owner", " "]):
        for local in ([], ["--local"]):
            with pytest.raises(SystemExit) as stopped:
                cli.main(["ingest", "notes.md", "--access", "private", *owner, *local])
            assert stopped.value.code == 2 and "--access private needs --owner" in capsys.readouterr().err
    assert not sent
    # A public document may name its owner (sent as ACCESS_PUBLIC, which the server takes with one).
    assert cli.main(["ingest", "notes.md", "--access", "public", "--owner", "alice"]) == 0
    assert cli.main(["ingest", "notes.md", "--access", "private", "--owner", "alice"]) == 0
    assert len(sent) == 2


def test_an_owner_without_access_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--access defaulted to public: `ingest --owner alice` sent again a private document of
    alice's, and published it."""
    sent: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_ingest_remote", lambda args: sent.append(args) or 0)
    for local in ([], ["--local"]):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["ingest", "notes.md", "--owner", "alice", *local])
        assert stopped.value.code == 2 and "--owner needs --access private or --access public" in capsys.readouterr().err
    assert not sent
    # Without an owner, a document is public as before.
    assert cli.main(["ingest", "notes.md"]) == 0 and sent[0].access == "public"


LATIN1 = os.fsdecode(b"caf\xe9")  # a Latin-1 terminal's "café", as Python reads it: a lone surrogate


@pytest.mark.parametrize(("argv", "error"), [
    (["query", LATIN1], "argument text: must be UTF-8 text, as a request carries it (got 'caf\\xe9'"),
    (["search", LATIN1], "argument text: must be UTF-8 text"),
    (["ask", LATIN1], "argument question: must be UTF-8 text"),
    (["delete", "a", LATIN1], "argument document_ids: must be UTF-8 text"),
    (["ingest", "a.txt", "--meta", f"k={LATIN1}"], "argument --meta: must be UTF-8 text"),
    (["ingest", "a.txt", "--access", "private", "--owner", LATIN1], "argument --owner: must be UTF-8 text"),
    (["ingest", "a.txt", "--access", "private", "--owner", "al", "--grant", LATIN1], "argument --grant: must be UTF-8 text"),
    (["ingest", "a.txt", "--document-id", LATIN1], "argument --document-id: must be UTF-8 text"),
    (["query", "x", "--user", "zoë"], "argument --user: must be printable ASCII, as the x-user-id header is (got 'zoë'"),
    (["health", "--token", "a\x01b"], "--token ($RETRIEVAL_TOKEN too) must be printable ASCII"),
    (["health", "--tls-key", "client.key"], "--tls-cert and --tls-key go together"),
    (["health", "--tls-cert", "client.pem", "--tls-key", ""], "--tls-cert and --tls-key go together"),
    (["health", "--server", "127.0.0.1:112847"], "--server's port must be 1 to 65535 (got 112847 in '127.0.0.1:112847')"),
    (["health", "--server", "localhost:0"], "--server's port must be 1 to 65535 (got 0"),
    (["health", "--server", "[::1]:65536"], "--server's port must be 1 to 65535 (got 65536"),
    (["health", "--server", "dns:///retrieval:70000"], "--server's port must be 1 to 65535 (got 70000"),
    (["health", "--server", "ipv4:127.0.0.1:1,127.0.0.2:99999"], "--server's port must be 1 to 65535 (got 99999"),
    # gRPC reads a target without its query and fragment, its %-escapes decoded.
    (["health", "--server", "localhost:99999?x"], "--server's port must be 1 to 65535 (got 99999 in 'localhost:99999?x')"),
    (["health", "--server", "dns:///localhost:70000#top"], "--server's port must be 1 to 65535 (got 70000"),
    (["health", "--server", "localhost:%37%30%30%30%30"], "--server's port must be 1 to 65535 (got 70000"),
])
def test_an_argument_no_request_can_carry_is_a_usage_error_naming_it(
    argv: list[str], error: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Each failed at the call, exit 1, as a library's exception naming no option (UnicodeEncodeError,
    "ValueError: the user id must be printable ASCII", a token's error speaking of a user id), or
    once for every file; a port past 65535 was taken modulo 65536, and another port connected to."""
    def sent(args: argparse.Namespace) -> int:
        pytest.fail(f"{argv[0]} was sent")

    for command in ("_remote", "_ask", "_ingest_remote"):
        monkeypatch.setattr(cli, command, sent)
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2 and error in capsys.readouterr().err


def test_the_arguments_a_request_carries_as_they_are_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[argparse.Namespace] = []
    for command in ("_remote", "_ingest_remote"):
        monkeypatch.setattr(cli, command, lambda args: called.append(args) or 0)
    for argv in (["query", "café ☕", "--user", "alice@example.com"], ["delete", "notes[1]", "é"],
                 ["ingest", "a.txt", "--meta", "lang=français"], ["health", "--server", "localhost:65535"],
                 ["health", "--server", "unix:/run/retrieval/70000"], ["health", "--server", "retrieval.example"],
                 ["health", "--server", "[fe80::1%25eth0]:50051"], ["health", "--server", "localhost:50051?x=70000"]):
        assert cli.main(argv) == 0
    assert len(called) == 8


def test_an_empty_server_address_is_the_default_from_the_environment_and_refused_as_an_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """RETRIEVAL_SERVER= (a template rendered empty) was four lines of gRPC's C core and "Failed to create channel to ''"."""
    called: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_remote", lambda args: called.append(args) or 0)
    monkeypatch.setenv("RETRIEVAL_SERVER", "")
    assert cli.main(["health"]) == 0 and called[-1].server == "localhost:50051"
    monkeypatch.setenv("RETRIEVAL_SERVER", "retrieval:50051")
    assert cli.main(["health"]) == 0 and called[-1].server == "retrieval:50051"
    for empty in ("", " "):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["search", "x", "--server", empty])
        assert stopped.value.code == 2 and "--server must name a server (HOST:PORT); it is empty" in capsys.readouterr().err
    assert len(called) == 2


def test_a_tls_file_that_is_not_pem_is_a_usage_error_naming_it(tmp_path: object, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """--tls-ca garbage.pem was lines of gRPC's C core, then "error: UNAVAILABLE" naming no file."""
    from pathlib import Path

    (garbage := Path(str(tmp_path)) / "bad.pem").write_text("garbage\n")
    called: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_remote", lambda args: called.append(args) or 0)
    for flag in ("--tls-ca", "--tls-cert"):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["health", flag, str(garbage)])
        assert stopped.value.code == 2 and f"error: {flag} {garbage} holds no PEM certificate" in capsys.readouterr().err
    assert not called


def test_a_tls_key_that_is_no_pem_key_or_not_the_certificates_is_a_usage_error_naming_it(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """--tls-key garbage.pem, or another certificate's key, was "error: search failed: ValueError:
    Tls.key ..." with exit 1, naming the Python client's field, where --tls-cert garbage.pem is exit 2."""
    from pathlib import Path

    from tests.support.pki import Authority

    authority = Authority(Path(str(tmp_path)) / "ca", "test CA")
    mine, other = authority.issue("client", client=True), authority.issue("other", client=True)
    (garbage := Path(str(tmp_path)) / "bad.pem").write_text("garbage\n")
    called: list[argparse.Namespace] = []
    monkeypatch.setattr(cli, "_remote", lambda args: called.append(args) or 0)
    for key, message in ((garbage, f"error: --tls-key {garbage} holds no PEM private key"),
                         (other.key, f"error: --tls-key {other.key} is not a private key gRPC can use with the certificate of --tls-cert {mine.cert}")):
        with pytest.raises(SystemExit) as stopped:
            cli.main(["search", "x", "--tls-cert", str(mine.cert), "--tls-key", str(key)])
        assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not called
    assert cli.main(["search", "x", "--tls-cert", str(mine.cert), "--tls-key", str(mine.key)]) == 0 and len(called) == 1


def test_graph_exports_role_is_taken_in_any_case() -> None:
    assert cli._parser().parse_args(["graph", "export", "g.graphml", "--user", "alice", "--role", "admin"]).role == "ADMIN"
