from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from retrieval_server.config import DEPLOYMENT_SETTINGS, RENAMED_SETTINGS, ConfigError, Settings, answer_fingerprint, load_settings, unknown_variables


def test_defaults_are_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("RETRIEVAL_QDRANT_URL", "RETRIEVAL_QDRANT_PATH", "RETRIEVAL_MYSQL_DSN"):
        monkeypatch.delenv(var, raising=False)
    s = load_settings()
    # No authentication by default, so loopback only (issue #10).
    assert (s.host, s.port, s.auth_mode) == ("127.0.0.1", 50051, "none")
    assert s.vector_backend == "edge" and s.metadata_backend == "sqlite"
    assert (s.query_max_bytes, s.top_k_default, s.top_k_max, s.search_top_k_max) == (65_536, 5, 100, 20)


def test_environment_selects_production_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIEVAL_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("RETRIEVAL_MYSQL_DSN", "mysql://u:p@db:3306/retrieval")
    s = load_settings()
    assert s.vector_backend == "qdrant" and s.metadata_backend == "mysql"


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("RETRIEVAL_PORT", "not-a-port", "RETRIEVAL_PORT"),
        ("RETRIEVAL_PORT", "70000", "RETRIEVAL_PORT"),
        ("RETRIEVAL_TOP_K_MAX", "0", "RETRIEVAL_TOP_K_MAX"),
        ("RETRIEVAL_LOG_LEVEL", "LOUD", "RETRIEVAL_LOG_LEVEL"),
        ("RETRIEVAL_CHILD_CHUNK_TOKENS", "500", "RETRIEVAL_CHILD_CHUNK_TOKENS must not exceed RETRIEVAL_PARENT_CHUNK_TOKENS"),
        # Checks of several settings name each by its variable too, not inside a file name.
        ("RETRIEVAL_MYSQL_DSN", "postgres://x", "RETRIEVAL_MYSQL_DSN must start with"),
        ("RETRIEVAL_MODEL_DIR", "/tmp/model_dir", "RETRIEVAL_MODEL_DIR '/tmp/model_dir' has no model.onnx"),
        ("RETRIEVAL_MODEL_DIR", "tls_cert", "RETRIEVAL_MODEL_DIR 'tls_cert' has no model.onnx"),  # a value is not a name
        # Not JSON: a settings error of its own before validation, which used to escape as a traceback.
        ("RETRIEVAL_GRAPH_HOP_PENALTIES", "1.0,0.7", "RETRIEVAL_GRAPH_HOP_PENALTIES: expected a JSON list"),
        ("RETRIEVAL_GRAPH_HOP_PENALTIES", '{"a": 1}', "RETRIEVAL_GRAPH_HOP_PENALTIES"),
        ("RETRIEVAL_GRAPH_HOP_PENALTIES", "[1.0, 0.5, 0.7]", "must not grow with the hop"),
        # Non-finite numbers, which every float setting used to take.
        ("RETRIEVAL_GRACE_PERIOD_S", "inf", "RETRIEVAL_GRACE_PERIOD_S: Input should be a finite number"),
        ("RETRIEVAL_RERANK_THRESHOLD", "nan", "RETRIEVAL_RERANK_THRESHOLD: Input should be a finite number"),
        ("RETRIEVAL_CACHE_TTL_S", "inf", "RETRIEVAL_CACHE_TTL_S"),
        ("RETRIEVAL_GRACE_PERIOD_S", "1e10", "RETRIEVAL_GRACE_PERIOD_S: Input should be less than or equal to 86400"),
        # qdrant-client counts in whole seconds: 0.5 became 0, and every call to the server failed.
        ("RETRIEVAL_QDRANT_TIMEOUT_S", "0.5", "RETRIEVAL_QDRANT_TIMEOUT_S"),
        ("RETRIEVAL_QDRANT_TIMEOUT_S", "0", "RETRIEVAL_QDRANT_TIMEOUT_S"),
        # Huge finite numbers, each of which crashed at run time (every retried Query, every cache
        # write, every search; gRPC's message size is a C int).
        ("RETRIEVAL_RETRY_POOL_FACTOR", "1e300", "RETRIEVAL_RETRY_POOL_FACTOR: Input should be less than or equal to 100"),
        # A reranker's scores are probabilities with the default sigmoid: 1.5 kept none of them.
        ("RETRIEVAL_RERANK_THRESHOLD", "1.5", "RETRIEVAL_RERANK_THRESHOLD 1.5 is no probability: with RETRIEVAL_RERANK_ACTIVATION 'sigmoid' scores lie in [0, 1]"),
        ("RETRIEVAL_RERANK_THRESHOLD", "-0.1", "RETRIEVAL_RERANK_THRESHOLD -0.1 is no probability"),
        ("RETRIEVAL_RERANK_THRESHOLD", "1e300", "RETRIEVAL_RERANK_THRESHOLD: Input should be less than or equal to 1000"),
        ("RETRIEVAL_CACHE_TTL_S", "1e16", "RETRIEVAL_CACHE_TTL_S: Input should be less than or equal to 2592000"),
        ("RETRIEVAL_HNSW_EF", str(2**64), "RETRIEVAL_HNSW_EF: Input should be less than or equal to 100000"),
        ("RETRIEVAL_MAX_MESSAGE_MB", "2048", "RETRIEVAL_MAX_MESSAGE_MB: Input should be less than or equal to 2047"),
        # URLs a call could not use, named at start-up rather than failing each call.
        ("RETRIEVAL_REDIS_URL", "http://cache:6379", "RETRIEVAL_REDIS_URL must start with redis:// or rediss:// or unix://"),
        ("RETRIEVAL_TEI_URL", "https://[::1", "RETRIEVAL_TEI_URL is not a URL"),
        ("RETRIEVAL_QDRANT_URL", "http://qdrant:port", "RETRIEVAL_QDRANT_URL is not a URL"),
        ("RETRIEVAL_OPENAI_BASE_URL", "https:///v1", "RETRIEVAL_OPENAI_BASE_URL names no host"),
        ("RETRIEVAL_MYSQL_DSN", "mysql://u:p@db:3306", "RETRIEVAL_MYSQL_DSN needs a database name"),
        # A misspelt variable, which was ignored: here the audience check went off without a word.
        ("RETRIEVAL_JWT_AUDIENCES", "retrieval", "RETRIEVAL_JWT_AUDIENCES: no such setting (did you mean RETRIEVAL_JWT_AUDIENCE?)"),
        ("retrieval_readonly", "true", "retrieval_readonly: no such setting (did you mean RETRIEVAL_READ_ONLY?)"),
        # A renamed setting: the closest spelling, RETRIEVAL_QUERY_MIN_CHARS, refused every short query.
        ("RETRIEVAL_QUERY_MAX_CHARS", "2000",
         "RETRIEVAL_QUERY_MAX_CHARS: renamed to RETRIEVAL_QUERY_MAX_BYTES (a length in UTF-8 bytes, not characters)"),
        ("retrieval_cache_breaker_failures", "3", "retrieval_cache_breaker_failures: renamed to RETRIEVAL_BREAKER_FAILURES"),
    ],
)
def test_invalid_values_name_the_variable(monkeypatch: pytest.MonkeyPatch, var: str, value: str, expected: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert expected in str(err.value)


def test_a_renamed_setting_names_its_new_name_and_no_other_hint() -> None:
    for old, (new, note) in RENAMED_SETTINGS.items():
        assert new.removeprefix("RETRIEVAL_").lower() in Settings.model_fields, (old, new)
        assert unknown_variables({old: "1"}) == [f"{old}: renamed to {new} ({note})"]


@pytest.mark.parametrize("var", ["RETRIEVAL_JWT_ISSUER", "RETRIEVAL_JWT_AUDIENCE", "RETRIEVAL_JWT_GROUPS_CLAIM", "RETRIEVAL_EVENTS_HASH_KEY",
                                 "RETRIEVAL_QDRANT_API_KEY", "RETRIEVAL_QDRANT_COLLECTION", "RETRIEVAL_OPENAI_MODEL",
                                 "RETRIEVAL_GEMINI_BASE_URL",
                                 # Paths: "" was Path("."), the working directory.
                                 "RETRIEVAL_DATA_DIR", "RETRIEVAL_VECTORS_DIR", "RETRIEVAL_MODEL_CACHE_DIR", "RETRIEVAL_MODEL_DIR",
                                 "RETRIEVAL_RERANKER_MODEL_DIR", "RETRIEVAL_TLS_CERT", "RETRIEVAL_TLS_KEY", "RETRIEVAL_TLS_CLIENT_CA",
                                 "RETRIEVAL_JWT_JWKS_FILE", "RETRIEVAL_GLOSSARY_PATH",
                                 # Taken as unset: with AUTH_MODE=jwt, every interface.
                                 "RETRIEVAL_HOST"])
def test_an_empty_value_is_refused_not_taken_as_one(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    """An issuer or audience of "" refused every token as lacking the claim, a hash key of "" hashed
    queries without a key, a data folder of "" wrote to the working directory: a secret or template
    that rendered to nothing, found only by its effects."""
    monkeypatch.setenv(var, "")
    with pytest.raises(ConfigError, match=f"{var}: is empty: set a value, or leave the variable unset"):
        load_settings()


@pytest.mark.parametrize(("var", "url", "password"), [
    ("RETRIEVAL_MYSQL_DSN", "mysql://retrieval:{}@mariadb:3306/retrieval", "Zk3/q9+Tx2"),
    ("RETRIEVAL_MYSQL_DSN", "mysql://retrieval:{}@mariadb:3306/retrieval", "r#8Lw0pQ"),
    ("RETRIEVAL_REDIS_URL", "redis://:{}@redis:6379/0", "Wq7?xK9j"),
    ("RETRIEVAL_EVENTS_URL", "amqp://retrieval:{}@rabbitmq:5672/", "Zk3/q9+Tx2"),
    # Digits before the '/': a port to the parser, and the host the user's name.
    ("RETRIEVAL_MYSQL_DSN", "mysql://retrieval:{}@mariadb:3306/retrieval", "83/kQx9"),
    ("RETRIEVAL_EVENTS_URL", "amqp://retrieval:{}@rabbitmq:5672/", "2024?Zk3x"),
])
def test_a_password_that_ends_a_url_early_is_named_and_not_shown(monkeypatch: pytest.MonkeyPatch, var: str, url: str, password: str) -> None:
    """The parser's message quoted the password up to its / ? or # as a port ("Port could not be
    cast to integer value as 'Zk3'"): the error misled, and printed part of a secret."""
    monkeypatch.setenv(var, url.format(password))
    with pytest.raises(ConfigError) as err:
        load_settings()
    message = str(err.value)
    assert f"{var} is not a URL" in message and "percent-encode any / ? # @ : in its user name or password" in message
    assert not any(password[i:i + 3] in message for i in range(len(password) - 2)), message
    monkeypatch.setenv(var, url.format(quote(password, safe="")))  # percent-encoded, as the message says
    load_settings(**({"cache_backend": "redis"} if var == "RETRIEVAL_REDIS_URL" else {}))


@pytest.mark.parametrize(("var", "value"), [
    ("RETRIEVAL_JWT_ISSUER", "https://id.example.org/\n"), ("RETRIEVAL_JWT_AUDIENCE", "retrieval-service\n"),
    ("RETRIEVAL_JWT_SECRET", "s" * 32 + "\n"), ("RETRIEVAL_EVENTS_HASH_KEY", " key"), ("RETRIEVAL_QDRANT_API_KEY", "key\r\n"),
    ("RETRIEVAL_OPENAI_API_KEY", "sk-abc\n"), ("RETRIEVAL_MYSQL_DSN", "mysql://u:p@db:3306/retrieval\n"),
    ("RETRIEVAL_QDRANT_URL", "\thttp://qdrant:6333"), ("RETRIEVAL_DATA_DIR", "data "),
    # Numbers took it, choices and yes/no were refused as no choice ("Input should be 'none', 'jwt'
    # or 'gateway'"), lists took it or not: one rule for every value.
    ("RETRIEVAL_PORT", "50051\n"), ("RETRIEVAL_PORT", " 80"), ("RETRIEVAL_GRACE_PERIOD_S", "10 "), ("RETRIEVAL_AUTH_MODE", "jwt\n"),
    ("RETRIEVAL_READ_ONLY", "true "), ("RETRIEVAL_JWT_ALGORITHMS", "RS256\n"), ("RETRIEVAL_GRAPH_HOP_PENALTIES", "[1.0, 0.7]\n"),
])
def test_white_space_around_a_value_is_refused(monkeypatch: pytest.MonkeyPatch, var: str, value: str) -> None:
    """A secret made from a file (kubectl --from-file, echo) ends in a newline: an issuer so padded
    started the server, which then refused every token as from another issuer."""
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=f"{var}: has leading or trailing white space \\(a file's newline\\?\\)"):
        load_settings()


@pytest.mark.parametrize("var", ["RETRIEVAL_JWT_AUDIENCE", "RETRIEVAL_DATA_DIR", "RETRIEVAL_QDRANT_COLLECTION", "RETRIEVAL_OPENAI_MODEL",
                                 "RETRIEVAL_HOST", "RETRIEVAL_QDRANT_URL", "RETRIEVAL_OPENAI_API_KEY", "RETRIEVAL_PORT", "RETRIEVAL_READ_ONLY"])
def test_a_value_of_white_space_only_is_refused(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, " \n")
    with pytest.raises(ConfigError, match=f"{var}: is only white space: set a value, or leave the variable unset"):
        load_settings()


@pytest.mark.parametrize("var", ["RETRIEVAL_QDRANT_URL", "RETRIEVAL_TEI_URL", "RETRIEVAL_EVENTS_URL", "RETRIEVAL_REDIS_URL",
                                 "RETRIEVAL_MYSQL_DSN", "RETRIEVAL_JWT_JWKS_URL", "RETRIEVAL_QDRANT_PATH", "RETRIEVAL_METRICS_HOST",
                                 "RETRIEVAL_OPENAI_API_KEY", "RETRIEVAL_ANTHROPIC_API_KEY", "RETRIEVAL_GEMINI_API_KEY"])
def test_an_empty_optional_url_path_or_key_reads_as_unset(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, "")
    assert getattr(load_settings(), var.removeprefix("RETRIEVAL_").lower()) is None


def test_an_empty_qdrant_url_leaves_several_processes_on_embedded_storage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Taken as a Qdrant server, "" had each worker open the embedded folder for writing: the second failed."""
    monkeypatch.setenv("RETRIEVAL_QDRANT_URL", "")
    s = load_settings(processes=2, data_dir=tmp_path)
    assert s.vector_backend == "edge" and not s.shares_writable_storage


@pytest.mark.parametrize("name", ["a/b", "chunks?v=2", "c:d", "a\\b", "a" * 256])
def test_a_collection_name_qdrant_refuses_is_named_at_start_up(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("RETRIEVAL_QDRANT_COLLECTION", name)
    with pytest.raises(ConfigError, match=r"RETRIEVAL_QDRANT_COLLECTION: .*(a Qdrant collection name may hold none of|at most 255 characters)"):
        load_settings()


def test_the_command_lines_and_the_tests_own_variables_are_no_typos(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RETRIEVAL_SERVER", "RETRIEVAL_TOKEN", "RETRIEVAL_SHARED_DIR", "RETRIEVAL_TEST_TARGET"):
        monkeypatch.setenv(name, "x")
    # Nor are the addresses Kubernetes service links set for a Service named retrieval.
    links = {"RETRIEVAL_SERVICE_HOST": "10.0.0.7", "RETRIEVAL_SERVICE_PORT": "50051", "RETRIEVAL_SERVICE_PORT_GRPC": "50051",
             "RETRIEVAL_PORT_50051_TCP": "tcp://10.0.0.7:50051", "RETRIEVAL_PORT_50051_TCP_PROTO": "tcp",
             "RETRIEVAL_PORT_50051_TCP_PORT": "50051", "RETRIEVAL_PORT_50051_TCP_ADDR": "10.0.0.7"}
    for name, value in links.items():
        monkeypatch.setenv(name, value)
    assert load_settings().port == 50051


def test_two_variables_of_one_setting_in_other_cases_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names are read case-insensitively: one of them won without a word, which one depending on
    the environment's order."""
    monkeypatch.setenv("retrieval_jwt_audience", "someone-else")
    monkeypatch.setenv("RETRIEVAL_AUTH_MODE", "jwt")
    monkeypatch.setenv("RETRIEVAL_JWT_SECRET", SECRET)
    assert load_settings().jwt_audience == "someone-else"  # alone, in any case, it is the setting
    monkeypatch.setenv("RETRIEVAL_JWT_AUDIENCE", "retrieval-service")
    with pytest.raises(ConfigError, match="RETRIEVAL_JWT_AUDIENCE and retrieval_jwt_audience set the same setting: keep one"):
        load_settings()
    monkeypatch.setenv("Retrieval_Jwt_Audience", "a-third")
    with pytest.raises(ConfigError, match="RETRIEVAL_JWT_AUDIENCE, Retrieval_Jwt_Audience and retrieval_jwt_audience set the same setting"):
        load_settings()


def test_a_certificate_pair_that_cannot_be_loaded_is_named_at_start_up(tmp_path: Path) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def pair(name: str) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
        (tmp_path / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (tmp_path / f"{name}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                 serialization.NoEncryption()))
        return tmp_path / f"{name}.pem", tmp_path / f"{name}.key"

    (a_cert, a_key), (_, b_key) = pair("a"), pair("b")
    assert load_settings(tls_cert=a_cert, tls_key=a_key).tls_cert == a_cert
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate")
    for cert, key in ((not_pem, a_key), (a_cert, b_key)):
        with pytest.raises(ConfigError, match="RETRIEVAL_TLS_CERT and RETRIEVAL_TLS_KEY are not a PEM certificate chain"):
            load_settings(tls_cert=cert, tls_key=key)
    with pytest.raises(ConfigError, match="RETRIEVAL_TLS_CLIENT_CA .* holds no PEM certificate"):
        load_settings(tls_cert=a_cert, tls_key=a_key, tls_client_ca=not_pem)
    # A key this process may not read (written 0600 by another user, as openssl does, and mounted
    # with the host's mode) is named as such, not as a file that is no PEM. Checked in a forked
    # child that becomes another user when this one is root, whom no mode stops.
    import multiprocessing
    import os
    import shutil
    import tempfile

    def check(cert: str, key: str, out: Any) -> None:
        try:
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            load_settings(tls_cert=cert, tls_key=key)
            out.send("loaded")
        except BaseException as exc:  # whatever it is, said in the parent
            out.send(f"{type(exc).__name__}: {exc}")

    with tempfile.TemporaryDirectory() as shared:  # pytest's folders are private to this user
        Path(shared).chmod(0o755)
        cert, key = shutil.copy(a_cert, shared), shutil.copy(a_key, shared)
        Path(cert).chmod(0o644)
        Path(key).chmod(0o600 if os.getuid() == 0 else 0)
        ours, theirs = multiprocessing.get_context("fork").Pipe()
        child = multiprocessing.get_context("fork").Process(target=check, args=(cert, key, theirs))
        child.start()
        theirs.close()
        said = ours.recv()
        child.join()
    assert "RETRIEVAL_TLS_KEY" in said and "cannot be read by this process" in said, said


def test_a_key_with_a_passphrase_is_named_at_start_up_not_asked_for(tmp_path: Path) -> None:
    """OpenSSL asked for the passphrase on the terminal, and the start-up waited there; with no
    terminal it stopped with "[Errno 22] Invalid argument"."""
    from tests.support.pki import Authority

    pair = Authority(tmp_path, "ca").issue("server", dns=("localhost",), passphrase=b"secret")
    with pytest.raises(ConfigError, match=re.escape("RETRIEVAL_TLS_KEY are not a PEM certificate chain and its private key: the private key "
                                                    "is encrypted (has a passphrase): gRPC cannot use it; write it unencrypted")):
        load_settings(tls_cert=pair.cert, tls_key=pair.key)


def test_a_glossary_that_is_not_utf8_is_named_at_start_up(tmp_path: Path) -> None:
    glossary = tmp_path / "glossary.txt"
    glossary.write_bytes("k8s = Kubernetes\nStra\u00dfe = street\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="RETRIEVAL_GLOSSARY_PATH .* cannot be read as UTF-8"):
        load_settings(glossary_path=glossary)


@pytest.mark.parametrize(("text", "expected"), [
    ("not json", "Expecting value"), ('{"keys": []}', "did not contain any keys"), ('{"kid": "a"}', "not a JWKS document"),
])
def test_a_jwks_file_that_holds_no_keys_is_named_at_start_up(tmp_path: Path, text: str, expected: str) -> None:
    """It failed the start-up later as "serve failed: JSONDecodeError ...", exit 1, naming no setting."""
    jwks = tmp_path / "jwks.json"
    jwks.write_text(text)
    with pytest.raises(ConfigError, match=f"RETRIEVAL_JWT_JWKS_FILE '{jwks}' cannot be read as a JWKS: .*{expected}"):
        load_settings(auth_mode="jwt", jwt_jwks_file=jwks)


def test_a_jwks_file_with_no_key_for_an_accepted_algorithm_is_named_at_start_up(tmp_path: Path) -> None:
    """It was accepted, and then every token refused (TOKEN_ALGORITHM): an RSA key with
    RETRIEVAL_JWT_ALGORITHMS=ES256, an 'oct' key with the default RS256,ES256,EdDSA."""
    import json

    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    rsa_key = json.loads(RSAAlgorithm.to_jwk(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()))
    jwks = tmp_path / "jwks.json"
    for keys, algorithms, kinds in (
        ([rsa_key], "ES256", "RSA (RS*, PS*)"),
        ([{**rsa_key, "alg": "PS256"}, {**rsa_key, "use": "enc"}], "RS256", "RSA PS256, RSA for use 'enc'"),
        ([{"kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}], "", "oct (HS256)"),
    ):
        jwks.write_text(json.dumps({"keys": keys}))
        accepted = algorithms.replace(",", ", ") or "RS256, ES256, EdDSA"
        with pytest.raises(ConfigError, match=re.escape(
                f"RETRIEVAL_JWT_JWKS_FILE '{jwks}' holds no key for an algorithm of RETRIEVAL_JWT_ALGORITHMS ({accepted}): "
                f"its keys are {kinds}, so every token would be refused")):
            load_settings(auth_mode="jwt", jwt_jwks_file=jwks, jwt_algorithms=algorithms)
    jwks.write_text(json.dumps({"keys": [rsa_key]}))
    assert load_settings(auth_mode="jwt", jwt_jwks_file=jwks, jwt_algorithms="ES256,PS384").jwt_jwks_file == jwks


@pytest.mark.parametrize("name", ["data_dir", "vectors_dir", "model_cache_dir", "qdrant_path"])
def test_a_folder_setting_naming_a_file_is_refused_at_start_up(tmp_path: Path, name: str) -> None:
    """It failed where the folder was first opened or made ("[Errno 20] Not a directory", "[Errno
    17] File exists"), naming no setting."""
    file = tmp_path / "a-file"
    file.write_text("")
    with pytest.raises(ConfigError, match=f"RETRIEVAL_{name.upper()} '{file}' is a file, not a folder"):
        load_settings(**{name: str(file)})
    with pytest.raises(ConfigError, match=f"RETRIEVAL_{name.upper()} '{file / 'sub'}' cannot be a folder: '{file}' is a file"):
        load_settings(**{name: str(file / "sub")})
    assert load_settings(**{name: str(tmp_path / "to-be-made" / "sub")})  # absent: made when first used


def test_model_dir_without_model_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no model.onnx"):
        load_settings(model_dir=tmp_path)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"processes": 2, "qdrant_path": ":memory:"}, "qdrant-client local mode is one process per folder"),
        ({"processes": 2, "port": 0}, "needs a fixed port"),
        ({"processes": 2, "qdrant_url": "http://qdrant:6333"}, "RETRIEVAL_CACHE_BACKEND 'redis' or 'none'"),
    ],
)
def test_several_processes_need_storage_they_can_share(overrides: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_settings(**overrides)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"port": 50051, "health_port": 50051}, "RETRIEVAL_PORT and RETRIEVAL_HEALTH_PORT are both 50051"),
        ({"port": 50051, "health_port": 50051, "processes": 2}, "RETRIEVAL_PORT and RETRIEVAL_HEALTH_PORT are both 50051"),
        ({"port": 50051, "metrics_port": 50051}, "RETRIEVAL_PORT and RETRIEVAL_METRICS_PORT are both 50051"),
        # A wildcard address takes the port on every interface, the gRPC one's too.
        ({"port": 50051, "metrics_port": 50051, "metrics_host": "0.0.0.0"}, "RETRIEVAL_METRICS_HOST other than RETRIEVAL_HOST"),
        # One address spelled two ways: gRPC binds localhost on both loopback addresses.
        ({"host": "127.0.0.1", "port": 50051, "metrics_port": 50051, "metrics_host": "localhost"}, "RETRIEVAL_METRICS_HOST other than RETRIEVAL_HOST"),
        ({"host": "localhost", "port": 50051, "metrics_port": 50051, "metrics_host": "::1"}, "RETRIEVAL_METRICS_HOST other than RETRIEVAL_HOST"),
        # The health service listens on the gRPC address too.
        ({"health_port": 8081, "metrics_port": 8081}, "RETRIEVAL_HEALTH_PORT and RETRIEVAL_METRICS_PORT are both 8081"),
        ({"health_port": 8081, "metrics_port": 8081, "metrics_host": "0.0.0.0"}, "RETRIEVAL_HEALTH_PORT and RETRIEVAL_METRICS_PORT"),
    ],
)
def test_one_port_for_two_listeners_is_a_conflict(overrides: dict[str, object], expected: str) -> None:
    """Found at bind time, it read as "address already in use", with two processes without naming
    the health port."""
    with pytest.raises(ConfigError, match=expected):
        load_settings(**overrides)


@pytest.mark.parametrize("path", ["/cache1", "/1/2", "/0x1"])
def test_a_redis_url_whose_path_is_no_database_number_is_refused(path: str) -> None:
    """redis-py reads such a path as database 0 without a word ("/1/2" as 12): replicas meant to
    share database 1 under another name shared 0 with whatever else uses it."""
    with pytest.raises(ConfigError) as err:
        load_settings(cache_backend="redis", redis_url=f"rediss://:S3cretPw@cache:6379{path}")
    message = str(err.value)
    assert "RETRIEVAL_REDIS_URL's path must be a database number or nothing (database 0)" in message and "S3cretPw" not in message
    for url in ("redis://cache:6379", "redis://cache:6379/", "redis://cache:6379/15", "unix:///run/redis.sock?db=2"):
        assert load_settings(cache_backend="redis", redis_url=url).redis_url == url


def test_a_redis_url_the_memory_cache_ignores_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default backend the URL was ignored without a word: each replica cached in its own
    memory and missed the invalidations of the others, whose operator took the cache to be shared."""
    monkeypatch.setenv("RETRIEVAL_REDIS_URL", "redis://cache:6379/0")
    monkeypatch.setenv("RETRIEVAL_CACHE_BACKEND", "memory")
    with pytest.raises(ConfigError, match=re.escape("RETRIEVAL_REDIS_URL is set but RETRIEVAL_CACHE_BACKEND is 'memory', which ignores "
                                                    "it: set RETRIEVAL_CACHE_BACKEND=redis, or unset RETRIEVAL_REDIS_URL")):
        load_settings()
    monkeypatch.setenv("RETRIEVAL_CACHE_BACKEND", "redis")
    assert load_settings().redis_url == "redis://cache:6379/0"
    # 'none' caches nothing, so no invalidation is missed: the benchmarks set it over a deployment's
    # environment (RETRIEVAL_CACHE_BACKEND=redis and its URL), and were refused, blaming a
    # RETRIEVAL_CACHE_BACKEND that was 'redis'.
    assert load_settings(cache_backend="none").cache_backend == "none"
    monkeypatch.setenv("RETRIEVAL_CACHE_BACKEND", "none")
    assert load_settings().redis_url == "redis://cache:6379/0"


def test_a_qdrant_api_key_without_a_qdrant_server_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty RETRIEVAL_QDRANT_URL reads as unset: a template that rendered the URL to nothing
    beside the key served the embedded store, each replica its own index on its pod's volume,
    and the key, the one sign of a Qdrant server being meant, was ignored without a word."""
    monkeypatch.setenv("RETRIEVAL_QDRANT_API_KEY", "key")
    monkeypatch.setenv("RETRIEVAL_QDRANT_URL", "")
    expected = re.escape("RETRIEVAL_QDRANT_API_KEY is set but RETRIEVAL_QDRANT_URL is not, and only a Qdrant server reads it")
    with pytest.raises(ConfigError, match=expected):
        load_settings()
    with pytest.raises(ConfigError, match=expected):
        load_settings(qdrant_path=":memory:")
    monkeypatch.setenv("RETRIEVAL_QDRANT_URL", "https://qdrant.svc:6333")
    assert load_settings().qdrant_api_key == "key"


@pytest.mark.parametrize(("overrides", "expected"), [
    # An empty RETRIEVAL_EVENTS_URL reads as unset: rendered so, no event was sent, without a word.
    ({}, "RETRIEVAL_EVENTS_HASH_KEY is set but RETRIEVAL_EVENTS_URL is not: no event is sent to hash a query in"),
    ({"events_url": "amqp://rabbitmq:5672/", "events_query": "text"},
     "RETRIEVAL_EVENTS_HASH_KEY is set but RETRIEVAL_EVENTS_QUERY is 'text', which hashes no query"),
    ({"events_url": "amqp://rabbitmq:5672/", "events_query": "none"},
     "RETRIEVAL_EVENTS_HASH_KEY is set but RETRIEVAL_EVENTS_QUERY is 'none', which hashes no query"),
])
def test_an_events_hash_key_nothing_reads_is_refused(monkeypatch: pytest.MonkeyPatch, overrides: dict[str, object], expected: str) -> None:
    """The key was ignored without a word: an operator who set it took the events to be sent, and
    their queries to travel as keyed hashes."""
    monkeypatch.setenv("RETRIEVAL_EVENTS_HASH_KEY", "key")
    monkeypatch.setenv("RETRIEVAL_EVENTS_URL", "")
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_settings(**overrides)
    assert load_settings(events_url="amqp://rabbitmq:5672/").events_hash_key == "key"


def test_the_vector_legs_may_not_both_weigh_nothing() -> None:
    """Under RRF the metadata and graph legs weigh relative to the stronger vector leg: both at 0
    made the metadata leg's weight 0.3 / 1e-9, and its scores reached callers as 2.7e7."""
    with pytest.raises(ConfigError, match="RETRIEVAL_SEMANTIC_WEIGHT and RETRIEVAL_KEYWORD_WEIGHT are both 0"):
        load_settings(semantic_weight=0, keyword_weight=0)
    assert load_settings(semantic_weight=0, keyword_weight=0.3).semantic_weight == 0
    assert load_settings(semantic_weight=0.7, keyword_weight=0).keyword_weight == 0


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"max_message_mb": 8},
     "RETRIEVAL_MAX_DOCUMENT_BYTES (16777216) does not fit in RETRIEVAL_MAX_MESSAGE_MB (8 MiB) with the 1 MiB the rest of its "
     "request may take, so gRPC would refuse it as RESOURCE_EXHAUSTED before the limit is checked: raise RETRIEVAL_MAX_MESSAGE_MB "
     "to at least 17 or lower RETRIEVAL_MAX_DOCUMENT_BYTES to at most 7340032"),
    # Exactly the message: no room for the request around the document.
    ({"max_message_mb": 16}, "raise RETRIEVAL_MAX_MESSAGE_MB to at least 17"),
    ({"max_message_mb": 2, "max_document_bytes": 1_048_576, "query_max_bytes": 2_000_000},
     "RETRIEVAL_QUERY_MAX_BYTES (2000000) does not fit in RETRIEVAL_MAX_MESSAGE_MB (2 MiB)"),
])
def test_a_field_limit_that_cannot_fit_in_the_message_limit_is_refused(overrides: dict[str, object], expected: str) -> None:
    """MAX_MESSAGE_MB=8 with the default 16 MiB MAX_DOCUMENT_BYTES loaded, and a 10 MiB document was
    refused by gRPC, RESOURCE_EXHAUSTED "Received message larger than max", not INVALID_ARGUMENT
    naming MAX_DOCUMENT_BYTES as documented."""
    with pytest.raises(ConfigError) as err:
        load_settings(**overrides)
    assert expected in str(err.value)


@pytest.mark.parametrize(("overrides", "expected"), [
    # 1 MiB leaves no byte beside the request's room: the check said "lower ... to at most 0", which
    # RETRIEVAL_MAX_DOCUMENT_BYTES's own bound (at least 1) refuses.
    ({"max_message_mb": 1, "max_document_bytes": 1}, "RETRIEVAL_MAX_MESSAGE_MB: Input should be greater than or equal to 2"),
    # Past 2046 MiB no MAX_MESSAGE_MB fits a document: the check said "raise ... to at least 2049",
    # which MAX_MESSAGE_MB's own bound (at most 2047) refuses.
    ({"max_message_mb": 2047, "max_document_bytes": 2**31 - 1},
     "RETRIEVAL_MAX_DOCUMENT_BYTES: Input should be less than or equal to 2145386496"),
])
def test_the_bounds_of_the_message_and_document_limits_are_those_that_can_load(overrides: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(**overrides)
    assert expected in str(err.value)
    assert load_settings(max_message_mb=2047, max_document_bytes=2145386496).max_document_bytes == 2046 * 1024 * 1024


def test_field_limits_that_fit_in_the_message_limit_load() -> None:
    assert load_settings().max_document_bytes + 1024 * 1024 <= load_settings().max_message_mb * 1024 * 1024
    settings = load_settings(max_message_mb=17)
    assert settings.max_document_bytes == 16 * 1024 * 1024
    assert load_settings(max_message_mb=2, max_document_bytes=1_048_576).query_max_bytes == 65_536


def test_a_child_must_fit_in_what_the_model_reads_beside_cls_and_sep() -> None:
    """A child of MAX_SEQ_LENGTH tokens was accepted, and its last two were never embedded."""
    with pytest.raises(ConfigError, match=r"RETRIEVAL_CHILD_CHUNK_TOKENS \(128\) must be at most RETRIEVAL_MAX_SEQ_LENGTH - 2 \(126\)"):
        load_settings(max_seq_length=128, child_chunk_tokens=128)
    assert load_settings(max_seq_length=128, child_chunk_tokens=126).child_chunk_tokens == 126


def test_metrics_may_share_the_port_number_on_another_address_or_when_off() -> None:
    assert load_settings(port=50051, metrics_port=50051, metrics_host="127.0.0.2").metrics_port == 50051
    assert not load_settings(port=50051, metrics_port=50051, metrics_enabled=False).metrics_enabled
    assert load_settings(port=0, metrics_port=0).port == 0  # each any free port
    assert load_settings(health_port=8081, metrics_port=8081, metrics_host="127.0.0.2").health_port == 8081
    assert not load_settings(health_port=8081, metrics_port=8081, metrics_enabled=False).metrics_enabled


def test_raw_rerank_logits_take_a_threshold_outside_0_to_1_within_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIEVAL_RERANK_ACTIVATION", "none")
    for value in ("-2.5", "4"):
        monkeypatch.setenv("RETRIEVAL_RERANK_THRESHOLD", value)
        assert load_settings().rerank_threshold == float(value)
    monkeypatch.setenv("RETRIEVAL_RERANK_THRESHOLD", "-1e300")
    with pytest.raises(ConfigError, match="RETRIEVAL_RERANK_THRESHOLD: Input should be greater than or equal to -1000"):
        load_settings()


def test_several_processes_over_embedded_storage_are_read_only_replicas(tmp_path: Path) -> None:
    from retrieval_server.supervisor import worker_settings

    s = load_settings(processes=2, data_dir=tmp_path)
    workers = [worker_settings(s, i) for i in range(2)]
    assert all(w.read_only for w in workers)  # each then serves a private copy of the vector folder
    assert not any(w.metrics_enabled for w in workers)  # the supervisor serves the sum of their metrics
    shared = load_settings(processes=2, qdrant_url="http://qdrant:6333", cache_backend="none")
    second = worker_settings(shared, 1)
    assert not second.read_only and second.vectors_dir is None  # a Qdrant server is shared and writable


@pytest.mark.parametrize(("overrides", "variable"), [
    ({"events_url": "http://rabbit:5672"}, "RETRIEVAL_EVENTS_URL must start with"),
    ({"events_buffer": 0}, "RETRIEVAL_EVENTS_BUFFER"),
    ({"events_query": "plain"}, "RETRIEVAL_EVENTS_QUERY"),
    ({"traces_exporter": "jaeger"}, "RETRIEVAL_TRACES_EXPORTER"),
])
def test_observability_settings_are_validated(overrides: dict[str, object], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings(**overrides)


def test_tracing_and_events_are_off_by_default() -> None:
    s = load_settings()
    assert s.traces_exporter == "none" and s.events_url is None and s.events_query == "hash"


SECRET = "s" * 32


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"host": "0.0.0.0"}, "is not a loopback address"),
        ({"auth_mode": "jwt"}, "exactly one of RETRIEVAL_JWT_SECRET, RETRIEVAL_JWT_JWKS_FILE, RETRIEVAL_JWT_JWKS_URL"),
        ({"auth_mode": "jwt", "jwt_secret": SECRET, "jwt_jwks_url": "http://idp/jwks"}, "exactly one of"),
        ({"auth_mode": "jwt", "jwt_secret": SECRET, "jwt_algorithms": "RS256"}, "RS256 cannot be verified with a shared secret"),
        ({"auth_mode": "jwt", "jwt_jwks_url": "http://idp/jwks", "jwt_algorithms": "HS256"}, "HS256 cannot be verified with public keys"),
        ({"auth_mode": "jwt", "jwt_secret": SECRET, "jwt_algorithms": "none"}, "unknown or unsafe algorithm 'none'"),
        ({"auth_mode": "jwt", "jwt_secret": "short"}, "RETRIEVAL_JWT_SECRET"),
        ({"auth_mode": "jwt", "jwt_jwks_url": "ftp://idp/jwks"}, "http:// or https://"),
        ({"auth_mode": "jwt", "jwt_secret": SECRET, "jwt_role_map": "admin=OWNER"}, "unknown roles"),
        # The last pair won without a word.
        ({"auth_mode": "jwt", "jwt_secret": SECRET, "jwt_role_map": "ops=SUPER_ADMIN,ops=USER"},
         "RETRIEVAL_JWT_ROLE_MAP: 'ops' is mapped to both SUPER_ADMIN and USER: map each name once"),
        ({"auth_mode": "gateway"}, "needs mutual TLS"),
        ({"tls_key": "/etc/hostname"}, "RETRIEVAL_TLS_CERT and RETRIEVAL_TLS_KEY go together"),
        ({"metrics_tls": True}, "RETRIEVAL_METRICS_TLS needs RETRIEVAL_TLS_CERT"),
    ],
)
def test_security_settings_are_checked(overrides: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_settings(**overrides)


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"jwt_secret": SECRET}, "RETRIEVAL_JWT_SECRET is set but RETRIEVAL_AUTH_MODE is 'none', which ignores it"),
    ({"host": "0.0.0.0", "allow_unauthenticated_remote": True, "jwt_issuer": "https://id/", "gateway_peers": "gw"},
     "RETRIEVAL_GATEWAY_PEERS, RETRIEVAL_JWT_ISSUER are set but RETRIEVAL_AUTH_MODE is 'none', which ignores them"),
    ({"auth_mode": "jwt", "jwt_secret": SECRET, "gateway_peers": "gw"}, "RETRIEVAL_GATEWAY_PEERS is set but RETRIEVAL_AUTH_MODE is 'jwt'"),
    ({"auth_mode": "gateway", "gateway_peers": "gw", "jwt_audience": "retrieval"}, "RETRIEVAL_JWT_AUDIENCE is set but RETRIEVAL_AUTH_MODE is 'gateway'"),
])
def test_a_setting_of_another_auth_mode_is_refused_not_ignored(overrides: dict[str, object], expected: str) -> None:
    """With the default mode 'none', a JWT secret or issuer was ignored and the headers believed, by
    an operator who took tokens to be checked."""
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_settings(**overrides)


def test_a_jwks_url_in_clear_text_is_refused_off_loopback_unless_allowed() -> None:
    """It was accepted silently: anyone on the path to the identity provider could swap the keys."""
    with pytest.raises(ConfigError, match=re.escape("RETRIEVAL_JWT_JWKS_URL 'http://idp.example.org/jwks' is http:// on a host that is not "
                                                    "loopback: anyone on the network path can replace its keys and sign tokens; use https://, "
                                                    "or set RETRIEVAL_JWT_JWKS_ALLOW_HTTP=true")):
        load_settings(auth_mode="jwt", jwt_jwks_url="http://idp.example.org/jwks")
    for url in ("http://127.0.0.1:8080/jwks", "http://[::1]/jwks", "http://LocalHost/jwks", "https://idp.example.org/jwks"):
        assert load_settings(auth_mode="jwt", jwt_jwks_url=url).jwt_jwks_url == url
    assert load_settings(auth_mode="jwt", jwt_jwks_url="http://idp.example.org/jwks", jwt_jwks_allow_http=True).jwt_jwks_allow_http


def test_an_empty_setting_of_another_auth_mode_reads_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRIEVAL_JWT_JWKS_URL", "")
    monkeypatch.setenv("RETRIEVAL_GATEWAY_PEERS", "")
    assert load_settings().auth_mode == "none"


def test_authenticated_modes_listen_everywhere_and_parse_lists() -> None:
    s = load_settings(auth_mode="jwt", jwt_secret=SECRET, jwt_role_map="realm-admin=admin, root=SUPER_ADMIN", jwt_algorithms="HS256, HS512")
    assert s.host == "0.0.0.0" and s.accepted_jwt_algorithms == ("HS256", "HS512")
    assert s.jwt_role_map == {"realm-admin": "ADMIN", "root": "SUPER_ADMIN"}
    assert load_settings(auth_mode="jwt", jwt_secret=SECRET, jwt_role_map="ops=ADMIN, ops=admin").jwt_role_map == {"ops": "ADMIN"}
    assert load_settings(host="0.0.0.0", allow_unauthenticated_remote=True).host == "0.0.0.0"
    assert load_settings(host="LOCALHOST").host == "LOCALHOST"  # a loopback name in any case: no authentication needed
    assert load_settings(auth_mode="jwt", jwt_jwks_url="https://idp/jwks").accepted_jwt_algorithms == ("RS256", "ES256", "EdDSA")


def test_the_answer_fingerprint_follows_what_shapes_answers_not_how_the_server_runs() -> None:
    from retrieval_server.supervisor import worker_settings

    assert DEPLOYMENT_SETTINGS <= set(Settings.model_fields), "a deployment setting that is not a setting"
    base = load_settings()
    same = answer_fingerprint(base, "onnx:abc")
    assert answer_fingerprint(load_settings(port=6000, workers=7, redis_key_prefix="other", data_dir="/elsewhere"), "onnx:abc") == same
    assert answer_fingerprint(worker_settings(base.model_copy(update={"processes": 2}), 1), "onnx:abc") == \
        answer_fingerprint(base.model_copy(update={"processes": 2}), "onnx:abc"), "workers sharing a cache would split it"
    # GENERATION's answer is written for each request from the cached contexts: its settings do not
    # shape what the cache holds.
    assert answer_fingerprint(load_settings(answer_max_tokens=64, llm_answer_temperature=0.9), "onnx:abc") == same
    assert answer_fingerprint(load_settings(rrf_k=61), "onnx:abc") != same
    assert answer_fingerprint(load_settings(parent_leg=False), "onnx:abc") != same
    assert answer_fingerprint(base, "onnx:def") != same


def test_repr_and_str_of_the_settings_show_no_secret() -> None:
    """What a log line or a traceback shows of the settings: every secret was in it, the passwords
    inside URLs too."""
    secrets = {"jwt_secret": "JWTSECRET-" + "x" * 32, "events_hash_key": "HASHKEY", "qdrant_api_key": "QDRANTKEY",
               "openai_api_key": "OPENAIKEY", "anthropic_api_key": "ANTHROPICKEY", "gemini_api_key": "GEMINIKEY"}
    urls = {"mysql_dsn": "mysql://u:MYSQLPW@db:3306/retrieval", "redis_url": "redis://:REDIS%40PW@redis:6379/0",
            "events_url": "amqp://u:AMQP@PW@rabbitmq:5672/", "tei_url": "http://u:TEIPW@tei:8080",
            "openai_base_url": "https://u:LLMPW@llm.example.org/v1", "qdrant_url": "https://u:QDRANTPW@qdrant:6333"}
    s = load_settings(auth_mode="jwt", cache_backend="redis", **secrets, **urls)
    keys = load_settings(auth_mode="jwt", jwt_jwks_url="https://u:JWKSPW@id.example.org/jwks")
    shown = repr(s) + str(s) + repr(keys) + str(keys)
    for word in ("JWTSECRET", "HASHKEY", "QDRANTKEY", "OPENAIKEY", "ANTHROPICKEY", "GEMINIKEY", "MYSQLPW", "REDIS", "AMQP", "PW"):
        assert word not in shown, word
    assert "mysql_dsn='mysql://db:3306/retrieval'" in shown and "events_url='amqp://rabbitmq:5672/'" in shown
    assert s.jwt_secret == secrets["jwt_secret"] and s.mysql_dsn == urls["mysql_dsn"]  # what the code reads is unchanged
