"""The Python client's helpers that build requests and print responses."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from retrieval.v1 import retrieval_pb2_grpc as pb_grpc
from retrieval_client import MAX_TIMEOUT_S, AsyncRetrievalClient, RetrievalClient, document_from_file, pb, to_json
from retrieval_server.api.convert import document_in
from retrieval_server.domain import Access, InvalidArgument

#: no server listens here; the channels connect lazily, and these tests never reach one
NOWHERE = "127.0.0.1:1"


class _Ended:
    """A stream call that ended without a message."""

    def __iter__(self) -> _Ended:
        return self

    def __next__(self) -> Message:
        raise StopIteration

    def cancel(self) -> None:
        pass


class RecordingStub:
    """Stands in for the generated stub: records each call's request and timeout (and the last
    call's metadata), answers None."""

    def __init__(self, awaitable: bool = False) -> None:
        self.calls: dict[str, tuple[Message, float | None]] = {}
        self.metadata: object = None
        self._awaitable = awaitable

    def __getattr__(self, method: str) -> Callable[..., Any]:
        def call(request: Message, *, metadata: object, timeout: float | None) -> Any:
            self.calls[method] = (request, timeout)
            self.metadata = metadata
            if method == "StreamQuery" and not self._awaitable:
                return _Ended()
            return self._answer() if self._awaitable else None

        return call

    @staticmethod
    async def _answer() -> None:
        return None


@pytest.mark.parametrize(("written", "access"), [("public", pb.ACCESS_PUBLIC), ("Private", pb.ACCESS_PRIVATE), ("PRIVATE", pb.ACCESS_PRIVATE)])
def test_a_file_is_public_or_private_as_asked(tmp_path: Path, written: str, access: int) -> None:
    (tmp_path / "a.txt").write_text("Aardvarks dig.")
    assert document_from_file(tmp_path / "a.txt", access=written, owner_id="alice").access == access


def test_a_files_source_is_its_path_normalized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The source was the path as typed, which the server's unchanged check reads: the same file
    sent as docs/a.txt, then ./docs/a.txt, was embedded again. Then it was the absolute path: the
    host's folders (/home/<user>/...) were in every hit, and the same tree synced to another folder
    was another source. A link is the path it is reached by."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Aardvarks dig.")
    (tmp_path / "link.txt").symlink_to(tmp_path / "docs" / "a.txt")
    monkeypatch.chdir(tmp_path)
    spelled = ["docs/a.txt", "./docs/a.txt", "docs/../docs/a.txt", "docs//a.txt", Path("docs/a.txt")]
    assert {document_from_file(p).source for p in spelled} == {"docs/a.txt"}
    assert document_from_file(tmp_path / "docs" / "." / "a.txt").source == str(tmp_path / "docs" / "a.txt")
    assert document_from_file("link.txt").source == "link.txt"


def test_access_left_out_is_sent_unset_so_the_server_refuses_it_with_an_owner(tmp_path: Path) -> None:
    """Access defaulted to an explicit ACCESS_PUBLIC, which the server takes with an owner: an
    owner re-sending her private document without its access published it."""
    (tmp_path / "a.txt").write_text("Alice's salary increase is 7 percent.")
    owned = document_from_file(tmp_path / "a.txt", owner_id="alice")
    assert owned.access == pb.ACCESS_UNSPECIFIED
    with pytest.raises(InvalidArgument) as refused:
        document_in(owned, 0, 1 << 20)
    assert [f for f, _ in refused.value.violations] == ["documents[0].access"]
    # No owner and no access: public, as before.
    assert document_in(document_from_file(tmp_path / "a.txt"), 0, 1 << 20).access is Access.PUBLIC


@pytest.mark.parametrize("written", ["public", "PUBLIC"])
def test_grants_on_a_public_file_are_refused(tmp_path: Path, written: str) -> None:
    """A grant sent without access="private" made a document for everyone to read (the server
    refuses it now)."""
    (tmp_path / "a.txt").write_text("Aardvarks dig.")
    with pytest.raises(ValueError, match=r"granted_user_ids need access='private' \(access is '(public|PUBLIC)'"):
        document_from_file(tmp_path / "a.txt", access=written, owner_id="alice", granted_user_ids=["bob"])
    with pytest.raises(ValueError, match="granted_user_ids need access='private'"):
        document_from_file(tmp_path / "a.txt", granted_user_ids=["bob"])
    assert document_from_file(tmp_path / "a.txt", access="private", owner_id="alice", granted_user_ids=["bob"]).granted_user_ids == ["bob"]


@pytest.mark.parametrize("written", ["privat", "restricted", "PRIVATE ", ""])
def test_an_access_level_that_is_none_of_them_is_refused_not_public(tmp_path: Path, written: str) -> None:
    """A typo made the document readable by everyone."""
    (tmp_path / "a.txt").write_text("Aardvarks dig.")
    with pytest.raises(ValueError, match="access must be one of public, private"):
        document_from_file(tmp_path / "a.txt", access=written)


def test_json_keeps_fields_whose_value_is_zero() -> None:
    """A first chunk's chunk_index (0), and an empty list of results, were left out."""
    first = json.loads(to_json(pb.SearchResponse(results=[pb.SearchResult(document_id="d", chunk_index=0)])))
    assert first["results"][0]["chunk_index"] == 0 and first["results"][0]["document_id"] == "d"
    assert json.loads(to_json(pb.SearchResponse()))["results"] == []


def test_one_string_where_ids_are_taken_is_refused_not_split_into_characters(tmp_path: Path) -> None:
    """A str is an iterable of str: delete("cache-notes") deleted document "e", and a grant to "bob" granted users b and o."""
    (tmp_path / "a.txt").write_text("Aardvarks dig.")
    with pytest.raises(TypeError, match=r"^granted_user_ids takes a list of ids, not one string \(got 'bob'\)$"):
        document_from_file(tmp_path / "a.txt", access="private", owner_id="alice", granted_user_ids="bob")
    with RetrievalClient(NOWHERE) as client:
        client._stub = stub = RecordingStub()
        for call in (
            lambda: client.delete("cache-notes"),
            lambda: client.delete(b"cache-notes"),  # type: ignore[arg-type]
            lambda: client.query("fusion", document_ids="fusion-guide"),
            lambda: client.stream_query("fusion", document_ids="fusion-guide"),
        ):
            with pytest.raises(TypeError, match="^document_ids takes a list of ids, not one string"):
                call()
        assert not stub.calls
        client.delete(["cache-notes"])
        client.query("fusion", document_ids=("fusion-guide", "cache-notes"))
    assert list(stub.calls["DeleteDocuments"][0].document_ids) == ["cache-notes"]  # type: ignore[attr-defined]
    assert list(stub.calls["Query"][0].filters.document_ids) == ["fusion-guide", "cache-notes"]  # type: ignore[attr-defined]
    granted = document_from_file(tmp_path / "a.txt", access="private", owner_id="alice", granted_user_ids=["bob"])
    assert list(granted.granted_user_ids) == ["bob"]


async def test_the_async_client_refuses_one_string_for_ids_too() -> None:
    async with AsyncRetrievalClient(NOWHERE) as client:
        client._stub = stub = RecordingStub(awaitable=True)
        with pytest.raises(TypeError, match="^document_ids takes a list of ids, not one string \\(got 'cache-notes'\\)$"):
            await client.delete("cache-notes")
        with pytest.raises(TypeError, match="^document_ids takes a list of ids"):
            await client.query("fusion", document_ids="fusion-guide")
        with pytest.raises(TypeError, match="^document_ids takes a list of ids"):
            client.stream_query("fusion", document_ids="fusion-guide")
        assert not stub.calls
        await client.delete(["cache-notes"])
    assert list(stub.calls["DeleteDocuments"][0].document_ids) == ["cache-notes"]  # type: ignore[attr-defined]


def test_groups_travel_as_one_comma_separated_header() -> None:
    """Documents granted to group:<name> were unreadable through a gateway: no client could say
    which groups its user is in."""
    with RetrievalClient(NOWHERE, user_id="dave", groups=["eng", "Sales EMEA"]) as client:
        client._stub = stub = RecordingStub()
        client.health()
    assert stub.metadata == (("x-user-id", "dave"), ("x-user-groups", "eng,Sales EMEA"))
    with RetrievalClient(NOWHERE, user_id="dave", groups=[]) as client:
        client._stub = stub = RecordingStub()
        client.health()
    assert stub.metadata == (("x-user-id", "dave"),)
    # The server splits the value on commas: "eng,hr" would be two groups.
    with pytest.raises(ValueError, match="^a group must not contain a comma: x-user-groups separates groups with it \\(got 'eng,hr'\\)$"):
        RetrievalClient(NOWHERE, user_id="dave", groups=["sales", "eng,hr"])
    with pytest.raises(TypeError, match="^groups takes a list of ids, not one string"):
        RetrievalClient(NOWHERE, user_id="dave", groups="eng")
    with pytest.raises(ValueError, match="the group must be printable ASCII"):
        RetrievalClient(NOWHERE, user_id="dave", groups=["zoë"])
    # The server drops space around a group, and an empty one: " hr" read hr's documents.
    for group in (" hr", "hr ", ""):
        with pytest.raises(ValueError, match="a group must be a name without space around it"):
            RetrievalClient(NOWHERE, user_id="dave", groups=[group])
    with RetrievalClient(NOWHERE, user_id="dave", groups=None) as client:  # as user_id=None and role=None
        client._stub = stub = RecordingStub()
        client.health()
    assert stub.metadata == (("x-user-id", "dave"),)


async def test_the_async_client_sends_groups_too() -> None:
    async with AsyncRetrievalClient(NOWHERE, user_id="dave", groups=("eng", "hr")) as client:
        client._stub = stub = RecordingStub(awaitable=True)
        await client.health()
    assert stub.metadata == (("x-user-id", "dave"), ("x-user-groups", "eng,hr"))
    with pytest.raises(ValueError, match="a group must not contain a comma"):
        AsyncRetrievalClient(NOWHERE, groups=["a,b"])


def test_the_default_timeout_does_not_bound_an_ingest_or_a_delete() -> None:
    """A 1 MB ingest of 16 documents took longer than the default 60 s and was cut short, storing
    part of the batch with no answer saying which: only a timeout the call is given bounds one."""
    doc = pb.DocumentInput(document_id="d", filename="d.txt", content=b"Aardvarks dig.")
    with RetrievalClient(NOWHERE) as client:
        client._stub = stub = RecordingStub()
        client.ingest([doc])
        client.delete(["d"])
        client.search("aardvarks")
        assert {m: t for m, (_, t) in stub.calls.items()} == {"IngestDocuments": None, "DeleteDocuments": None, "Search": 60.0}
        client.ingest([doc], timeout=5)
        client.delete(["d"], timeout=7)
        assert (stub.calls["IngestDocuments"][1], stub.calls["DeleteDocuments"][1]) == (5, 7)


async def test_the_async_clients_default_timeout_does_not_bound_an_ingest_or_a_delete() -> None:
    doc = pb.DocumentInput(document_id="d", filename="d.txt", content=b"Aardvarks dig.")
    async with AsyncRetrievalClient(NOWHERE, timeout=30) as client:
        client._stub = stub = RecordingStub(awaitable=True)
        await client.ingest([doc])
        await client.delete(["d"])
        await client.search("aardvarks")
        assert {m: t for m, (_, t) in stub.calls.items()} == {"IngestDocuments": None, "DeleteDocuments": None, "Search": 30}
        await client.ingest([doc], timeout=5)
        assert stub.calls["IngestDocuments"][1] == 5


def test_an_infinite_or_huge_timeout_is_no_deadline_or_the_longest_one_grpc_holds() -> None:
    """timeout=inf, or 1e10 s and more, overflowed the deadline: the call failed at once with
    DEADLINE_EXCEEDED, without reaching the server."""
    with RetrievalClient(NOWHERE, timeout=math.inf) as unbounded, RetrievalClient(NOWHERE, timeout=1e10) as long:
        unbounded._stub = stub = RecordingStub()
        unbounded.search("aardvarks")
        assert stub.calls["Search"][1] is None
        long._stub = stub = RecordingStub()
        long.search("aardvarks")
        assert stub.calls["Search"][1] == MAX_TIMEOUT_S == 1e9
        for asked, sent in ((math.inf, None), (1e12, MAX_TIMEOUT_S), (1e9, 1e9), (0, None), (2.5, 2.5)):
            long.query("aardvarks", timeout=asked)
            assert stub.calls["Query"][1] == sent, asked


@pytest.mark.parametrize("timeout", [math.nan, -1.0, -math.inf])
async def test_a_negative_or_nan_timeout_is_refused_naming_it(timeout: float) -> None:
    with pytest.raises(ValueError, match=r"^timeout must be 0 to inf seconds, 0 and inf for no deadline \(got "):
        RetrievalClient(NOWHERE, timeout=timeout)
    with pytest.raises(ValueError, match="^timeout must be 0 to inf seconds"):
        AsyncRetrievalClient(NOWHERE, timeout=timeout)
    with RetrievalClient(NOWHERE) as client:
        client._stub = stub = RecordingStub()
        with pytest.raises(ValueError, match="^timeout must be 0 to inf seconds"):
            client.search("aardvarks", timeout=timeout)
        with pytest.raises(ValueError, match="^timeout must be 0 to inf seconds"):
            client.ingest([], timeout=timeout)
    assert not stub.calls


@pytest.mark.parametrize(("top_k", "error"), [(2**31, ValueError), (-(2**31) - 1, ValueError), (1.5, TypeError), (2.0, TypeError), ("3", TypeError), (True, TypeError)])
async def test_a_top_k_that_is_no_int32_is_refused_naming_it(top_k: object, error: type[Exception]) -> None:
    """As by the Node client's RangeError: protobuf refused 2**31 with "Value out of range" and
    1.5 with a TypeError about a float, neither naming top_k; True was sent as 1."""
    expected = rf"^top_k must be an integer from -2147483648 to 2147483647 \(got {top_k!r}\)$"
    with RetrievalClient(NOWHERE) as client:
        client._stub = stub = RecordingStub()
        for call in (lambda: client.query("fusion", top_k=top_k), lambda: client.search("fusion", top_k=top_k),  # type: ignore[arg-type]
                     lambda: client.stream_query("fusion", top_k=top_k)):  # type: ignore[arg-type]
            with pytest.raises(error, match=expected):
                call()
        client.search("fusion", top_k=2**31 - 1)
        client.query("fusion", top_k=-(2**31))
    assert not {"StreamQuery"} & stub.calls.keys()
    assert (stub.calls["Search"][0].top_k, stub.calls["Query"][0].top_k) == (2**31 - 1, -(2**31))  # type: ignore[attr-defined]
    async with AsyncRetrievalClient(NOWHERE) as aclient:
        aclient._stub = RecordingStub(awaitable=True)
        with pytest.raises(error, match=expected):
            await aclient.search("fusion", top_k=top_k)  # type: ignore[arg-type]
        with pytest.raises(error, match=expected):
            await aclient.query("fusion", top_k=top_k)  # type: ignore[arg-type]


#: targets that reach another machine, or may: each was read as loopback from the text after its
#: last "/" (a query, a fragment), or from one address of a list, or is a scheme not known to be local
REMOTE_TARGETS = [
    "192.0.2.2:50051", "dns:///192.0.2.2:50051?x=/127.0.0.1", "dns:///192.0.2.2:50051#/localhost",
    "ipv4:192.0.2.2:50051?x=/localhost", "ipv4:192.0.2.2:50051#/localhost", "ipv4:127.0.0.1:1,192.0.2.2:50051",
    "ipv6:[::1]:1,[2001:db8::2]:50051", "ipv4:localhost:50051", "dns:///127.0.0.1%3A50051", "dns://192.0.2.53/localhost:50051",
    "xds:///localhost:50051", "unix-abstract:retrieval", "localhost:50051/x", "localhost.example:50051", "::ffff:192.0.2.2",
]
LOCAL_TARGETS = [
    "localhost:50051", "localhost", "127.0.0.2:50051", "[::1]:50051", "::1", "dns:///localhost:50051", "dns:localhost:50051",
    "dns:/[::1]:50051", "ipv4:127.0.0.1:1,127.0.0.2:2", "ipv4:///127.0.0.1:50051", "ipv6:[::1]:50051", "ipv6:::1",
    "unix:/run/retrieval.sock", "unix:///run/retrieval.sock", "unix:retrieval.sock",
]


@pytest.mark.parametrize("target", REMOTE_TARGETS)
def test_a_token_goes_in_clear_to_no_target_that_may_reach_another_machine(target: str) -> None:
    """gRPC drops a target's query and fragment: the token went in clear to 192.0.2.2."""
    for client in (RetrievalClient, AsyncRetrievalClient):
        with pytest.raises(ValueError, match=r"^a bearer token travels only over TLS, or to this machine .* got " + re.escape(repr(target))):
            client(target, token="secret")


@pytest.mark.parametrize("target", LOCAL_TARGETS)
def test_a_token_goes_in_clear_to_this_machine(target: str) -> None:
    RetrievalClient(target, token="secret").close()


async def test_a_query_sets_fusion_and_rerank_or_leaves_them_unset() -> None:
    """They were out of the client's reach."""
    with RetrievalClient(NOWHERE) as client:
        client._stub = stub = RecordingStub()
        client.query("fusion")
        plain = stub.calls["Query"][0]
        assert (plain.fusion, plain.HasField("rerank")) == (pb.FUSION_UNSPECIFIED, False)  # type: ignore[attr-defined]
        client.query("fusion", fusion="Weighted", rerank=False)
        asked = stub.calls["Query"][0]
        assert (asked.fusion, asked.HasField("rerank"), asked.rerank) == (pb.FUSION_WEIGHTED, True, False)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match=r"^fusion must be one of rrf, weighted, or None for the server's \(got 'rfr'\)$"):
            client.stream_query("fusion", fusion="rfr")
        assert list(client.stream_query("fusion", fusion="rrf", rerank=True)) == []  # read: the call starts at the first read
        streamed = stub.calls["StreamQuery"][0].query  # type: ignore[attr-defined]
        assert (streamed.fusion, streamed.rerank) == (pb.FUSION_RRF, True)
    async with AsyncRetrievalClient(NOWHERE) as aclient:
        aclient._stub = astub = RecordingStub(awaitable=True)
        await aclient.query("fusion", fusion="rrf", rerank=False)
        assert (astub.calls["Query"][0].fusion, astub.calls["Query"][0].rerank) == (pb.FUSION_RRF, False)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="^fusion must be one of rrf, weighted"):
            aclient.stream_query("fusion", fusion="sum")


async def test_the_stub_and_the_identity_metadata_are_public() -> None:
    """As Node's service and metadata(), Go's Service(): for the calls the client does not make."""
    with RetrievalClient(NOWHERE, user_id="dave", role="ADMIN", groups=["eng"]) as client:
        assert client.metadata == (("x-user-id", "dave"), ("x-user-role", "ADMIN"), ("x-user-groups", "eng"))
        assert callable(client.service.StreamQuery) and callable(client.service.IngestDocuments)
    async with AsyncRetrievalClient(NOWHERE, token="t") as aclient:
        assert aclient.metadata == (("authorization", "Bearer t"),)
        assert callable(aclient.service.Health)


def test_a_file_is_read_within_its_limit_only(tmp_path: Path) -> None:
    from retrieval_client import file_bytes

    (f := tmp_path / "a.txt").write_bytes(b"x" * 10)
    assert file_bytes(f, max_bytes=10) == b"x" * 10
    with pytest.raises(ValueError, match=r"its size, 10 bytes, is over the limit of 9 bytes \(RETRIEVAL_MAX_DOCUMENT_BYTES\)"):
        file_bytes(f, max_bytes=9, limit="RETRIEVAL_MAX_DOCUMENT_BYTES")
    with pytest.raises(ValueError, match=r"not a regular file \(a folder\)"):
        document_from_file(tmp_path)


async def test_a_tls_file_that_holds_no_pem_certificate_or_key_is_refused_naming_it(tmp_path: Path) -> None:
    """gRPC read a CA or certificate file of anything else as no certificate (lines of its C core),
    and a key file as a key that fails the handshake: every call UNAVAILABLE naming no file, after
    a second of retries. Refused as the Tls is made, as the Go and TypeScript clients refuse them."""
    from retrieval_client import Tls
    from tests.support.pki import Authority

    authority = Authority(tmp_path / "ca", "test CA")
    issued = authority.issue("client", client=True)
    (garbage := tmp_path / "bad.pem").write_text("garbage\n")
    for files, field, holds in (({"ca": garbage}, "Tls.ca", "PEM certificate"),
                                ({"ca": authority.ca, "cert": garbage, "key": issued.key}, "Tls.cert", "PEM certificate"),
                                ({"ca": authority.ca, "cert": issued.cert, "key": garbage}, "Tls.key", "PEM private key"),
                                ({"ca": authority.ca, "cert": issued.cert, "key": issued.cert}, "Tls.key", "PEM private key")):
        with pytest.raises(ValueError, match=re.escape(f"{field} {files.get(field[4:])} holds no {holds}")):
            Tls(**files)
    tls = Tls(ca=authority.ca, cert=issued.cert, key=issued.key)
    RetrievalClient(NOWHERE, tls=tls).close()
    await AsyncRetrievalClient(NOWHERE, tls=tls).close()


def test_a_client_certificate_and_a_key_that_are_no_pair_are_refused_naming_both(tmp_path: Path) -> None:
    """gRPC took another certificate's key, or an encrypted one, and every call failed UNAVAILABLE
    naming neither file, after a second of retries and lines of its C core ("Handshaker factory
    creation failed"). Refused as the Tls is made, as Go's New refuses them (crypto/tls)."""
    from retrieval_client import Tls
    from tests.support.pki import Authority

    authority = Authority(tmp_path / "ca", "test CA")
    mine, other = authority.issue("client", client=True), authority.issue("other", client=True)
    locked = authority.issue("locked", client=True, passphrase=b"secret")
    for cert, key, why in ((mine.cert, other.key, "KEY_VALUES_MISMATCH"), (locked.cert, locked.key, "is encrypted (has a passphrase)")):
        with pytest.raises(ValueError, match=re.escape(f"Tls.key {key} is not a private key gRPC can use with the certificate of Tls.cert {cert}")) as refused:
            Tls(ca=authority.ca, cert=cert, key=key)
        assert why in str(refused.value)
    RetrievalClient(NOWHERE, tls=Tls(ca=authority.ca, cert=mine.cert, key=mine.key)).close()


def test_a_client_certificate_openssl_rates_weak_is_taken_as_grpc_takes_it(tmp_path: Path) -> None:
    """The pair was loaded under OpenSSL's default security level (2 on Debian), which refused a
    1024-bit RSA key (EE_KEY_TOO_SMALL) or a certificate signed with SHA-1 (CA_MD_TOO_WEAK) as "not
    a private key gRPC can use", where gRPC (BoringSSL, no security level) made the call with them."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    from retrieval_client import Tls
    from tests.support.pki import Authority

    now = datetime.datetime.now(datetime.timezone.utc)
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "legacy client")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=7)).sign(key, hashes.SHA256()))
    (cert_path := tmp_path / "client.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (key_path := tmp_path / "client-key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    authority = Authority(tmp_path / "ca", "test CA")
    server_pair = authority.issue("localhost", dns=("localhost",))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_secure_port("localhost:0", grpc.ssl_server_credentials(
        [(server_pair.key.read_bytes(), server_pair.cert.read_bytes())], root_certificates=cert_path.read_bytes(), require_client_auth=True))
    server.start()
    try:
        tls = Tls(ca=authority.ca, cert=cert_path, key=key_path)
        with grpc.secure_channel(f"localhost:{port}", tls.credentials()) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        server.stop(None)


def test_the_package_loads_its_names_on_first_use_and_lists_them() -> None:
    """file_bytes alone loads no gRPC (ingest --local), while a bare `import retrieval_client`
    still reaches `retrieval_client.client` and lists its names, as when it imported them all."""
    import subprocess
    import sys

    script = (
        "import sys, retrieval_client\n"
        "from retrieval_client import file_bytes\n"
        "light = 'grpc' not in sys.modules\n"
        "names = set(dir(retrieval_client))\n"
        "print(light, retrieval_client.client.RetrievalClient is retrieval_client.RetrievalClient,"
        " set(retrieval_client.__all__) <= names, retrieval_client.pb.QueryRequest.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out == ["True", "True", "True", "QueryRequest"]


class _Echo(pb_grpc.RetrievalServiceServicer):
    """Health answers with the caller's user agent as its version."""

    def Health(self, request: pb.HealthRequest, context: grpc.ServicerContext) -> pb.HealthResponse:
        return pb.HealthResponse(version=dict(context.invocation_metadata())["user-agent"])


@pytest.fixture
def echo() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(2))
    pb_grpc.add_RetrievalServiceServicer_to_server(_Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


async def test_channel_options_are_the_callers_to_add_and_replace(echo: str) -> None:
    """The Python client had no way to set them (Go has WithDialOptions, TypeScript channelOptions).
    One named as the client's own replaces it: gRPC reads the first of two of one name."""
    agent = [("grpc.primary_user_agent", "probe/1.0")]
    tiny = [("grpc.max_receive_message_length", 10)]
    with RetrievalClient(echo, options=agent) as client:
        assert client.health().version.startswith("probe/1.0 ")
    async with AsyncRetrievalClient(echo, options=agent) as aclient:
        assert (await aclient.health()).version.startswith("probe/1.0 ")
    with RetrievalClient(echo, options=tiny, retries=0) as client, pytest.raises(grpc.RpcError) as refused:
        client.health()
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    for bad in (["grpc.primary_user_agent"], [("grpc.primary_user_agent",)], [(1, "x")]):
        with pytest.raises(TypeError, match=r"^options must be \(name, value\) pairs with a str name"):
            RetrievalClient(echo, options=bad)  # type: ignore[arg-type]
