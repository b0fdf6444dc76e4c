"""Certificates made by the tests (the cryptography package): CAs, server and client certificates."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(*common_names: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name) for name in common_names])


@dataclass
class Issued:
    cert: Path
    key: Path
    serial: int


class Authority:
    """A certificate authority that writes what it signs into a folder."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.ca = folder / f"{name}-ca.pem"
        self.ca.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str, *, dns: tuple[str, ...] = (), ips: tuple[str, ...] = (), emails: tuple[str, ...] = (), client: bool = False,
              cert_path: Path | None = None, key_path: Path | None = None, passphrase: bytes | None = None,
              more_common_names: tuple[str, ...] = ()) -> Issued:
        """``more_common_names`` follow ``common_name`` in the subject, each a CN of its own."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        serial = x509.random_serial_number()
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips] + [x509.RFC822Name(e) for e in emails]
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, *more_common_names))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_path = cert_path or self.folder / f"{common_name}.pem"
        key_path = key_path or self.folder / f"{common_name}-key.pem"
        # Written to temporary names, then renamed: a server re-reading them never sees half a file.
        for path, data in (
            (key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption())),
            (cert_path, cert.public_bytes(serialization.Encoding.PEM)),
        ):
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return Issued(cert_path, key_path, serial)
