"""The PEM files of a TLS channel, checked before gRPC reads them: gRPC took any file, and every
call failed UNAVAILABLE naming none. The client and the CLI check them the same way."""

from __future__ import annotations

import re
import ssl
from pathlib import Path


def pem_certificates(path: Path | str, field: str) -> bytes:
    """The file's bytes, which must hold a PEM certificate: gRPC read any other file as no
    certificate, and every call failed UNAVAILABLE naming no file, after lines of its C core."""
    data = Path(path).read_bytes()
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise ValueError(f"{field} {path} holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)")
    return data


#: the start of a PEM private key of any kind (PKCS#8, RSA, EC, ENCRYPTED), as the TypeScript client's _PEM_PRIVATE_KEY
_PEM_PRIVATE_KEY = re.compile(rb"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")


def pem_key(path: Path | str, field: str) -> bytes:
    """The file's bytes, which must hold a PEM private key: gRPC failed every call UNAVAILABLE
    "Failed to create security handshaker", naming no file, after a second of retries."""
    data = Path(path).read_bytes()
    if not _PEM_PRIVATE_KEY.search(data):
        raise ValueError(f"{field} {path} holds no PEM private key (a -----BEGIN ... PRIVATE KEY----- block)")
    return data


def _refuse_passphrase() -> bytes:
    """The ``password`` of ``load_cert_chain``: without one, OpenSSL asked for an encrypted key's
    passphrase at the terminal; gRPC takes none, and cannot use such a key."""
    raise ValueError("it is encrypted (has a passphrase), which gRPC cannot use: write it unencrypted, e.g. openssl pkey -in key.pem -out key-plain.pem")


def check_key_pair(cert: Path | str, cert_field: str, key: Path | str, key_field: str) -> None:
    """ValueError naming both files unless ``key`` is the unencrypted private key of the certificate
    in ``cert``: gRPC took any pair of PEM files, and every call failed UNAVAILABLE, naming neither,
    after its retries and lines of its C core ("Handshaker factory creation failed")."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # Security level 0, as gRPC's BoringSSL has none: under OpenSSL's default a 1024-bit RSA key
    # (EE_KEY_TOO_SMALL) or a chain signed with SHA-1 (CA_MD_TOO_WEAK) was refused, and gRPC uses them.
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    try:
        context.load_cert_chain(cert, key, password=_refuse_passphrase)
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError(f"{key_field} {key} is not a private key gRPC can use with the certificate of {cert_field} {cert}: {exc}") from None
