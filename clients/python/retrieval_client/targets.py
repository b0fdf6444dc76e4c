"""gRPC targets read as gRPC reads them (https://github.com/grpc/grpc/blob/master/doc/naming.md):
the client and the CLI decide with them whether a token may travel without TLS."""

from __future__ import annotations

import ipaddress
import re


#: a host[:port] as gRPC's dns resolver reads it: "localhost:50051", "127.0.0.1", "[::1]:50051"
_HOST_PORT = re.compile(r"(?:\[(?P<bracketed>[^\]]*)\]|(?P<host>[^:\[\]]*))(?::[0-9]+)?")


def _loopback_address(address: str, *, names: bool) -> bool:
    """Whether one ``host[:port]`` of a target is a loopback address, or ``localhost`` when
    ``names`` (the dns resolver's; an ipv4: or ipv6: list holds addresses only)."""
    try:
        return ipaddress.ip_address(address).is_loopback  # a bare IPv6 address, whose colons are no port
    except ValueError:
        pass
    if not (match := _HOST_PORT.fullmatch(address)):
        return False
    host = match["bracketed"] if match["bracketed"] is not None else match["host"]
    if names and host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolver_path(rest: str) -> str | None:
    """What a resolver reads of ``scheme:rest``: its path, less one leading "/". None when the
    target names an authority: for dns: a DNS server, which may answer "localhost" with any address."""
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        return None if authority else path
    return rest.removeprefix("/")


def is_loopback(target: str) -> bool:
    """Whether a gRPC target reaches this machine only, read as gRPC reads it
    (https://github.com/grpc/grpc/blob/master/doc/naming.md): ``host:port``, ``[v6]:port``, or
    ``dns:``, ``ipv4:`` or ``ipv6:`` with every address of the list a loopback one, or a
    ``unix:`` socket, which no other machine reaches. Any other scheme is not known to be local."""
    # gRPC drops a query and a fragment and decodes %-escapes, so a host read from the text around
    # them is not the one it connects to: "dns:///192.0.2.2:50051?x=/localhost" is 192.0.2.2.
    if any(c in target for c in "?#%"):
        return False
    scheme, _, rest = target.partition(":")
    if scheme == "unix":
        return True
    if scheme == "dns":
        path = resolver_path(rest)
        return path is not None and _loopback_address(path, names=True)
    if scheme in ("ipv4", "ipv6"):
        path = resolver_path(rest)
        return path is not None and all(_loopback_address(address, names=False) for address in path.split(","))
    return _loopback_address(target, names=True)  # no scheme: gRPC reads it as dns:///<target>
