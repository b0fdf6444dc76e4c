"""Each address's calls in flight, held to RETRIEVAL_MAX_CALLS_PER_PEER (the end-to-end refusal is
in tests/e2e/test_grpc_server.py: loopback is one address)."""

from __future__ import annotations

import pytest

from retrieval_server.api.admission import CallsPerPeer, peer_address


def test_an_address_past_its_limit_is_refused_while_another_is_served_and_an_ended_call_frees_room() -> None:
    peers = CallsPerPeer(2)
    assert peers.enter("ipv4:10.0.0.1") and peers.enter("ipv4:10.0.0.1")
    assert not peers.enter("ipv4:10.0.0.1")
    assert peers.in_flight("ipv4:10.0.0.1") == 2  # the refused call is not counted
    assert peers.enter("ipv4:10.0.0.2")
    peers.leave("ipv4:10.0.0.1")
    assert peers.enter("ipv4:10.0.0.1")
    for peer in ("ipv4:10.0.0.1", "ipv4:10.0.0.1", "ipv4:10.0.0.2"):
        peers.leave(peer)
    assert peers._calls == {}  # no address is kept once its calls ended


@pytest.mark.parametrize(("peer", "address"), [
    ("ipv4:10.0.0.1:51234", "ipv4:10.0.0.1"),
    ("ipv6:[::1]:51234", "ipv6:[::1]"),
    ("ipv6:[2001:db8::7]:443", "ipv6:[2001:db8::7]"),
    ("unix:/run/retrieval.sock", "unix"),
])
def test_a_peer_is_counted_by_its_address_whatever_its_port(peer: str, address: str) -> None:
    assert peer_address(peer) == address
