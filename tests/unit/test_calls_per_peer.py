"""Each address's calls in flight, held to RETRIEVAL_MAX_CALLS_PER_PEER (the end-to-end refusal is
in tests/e2e/test_grpc_server.py: loopback is one address)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from retrieval_server.api.admission import CallsPerPeer, _ReadWithin, peer_address
from retrieval_server.domain import RequestNotRead


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


class _Call:
    """A call's context whose message comes when ``message`` is set (never, unset)."""

    def __init__(self) -> None:
        self.message = asyncio.Event()

    async def read(self) -> bytes:
        await self.message.wait()
        return b"request"

    async def abort(self, code: grpc.StatusCode, details: str, trailing_metadata: object = ()) -> None:
        raise grpc.aio.AbortError(f"{code.name}: {details}")


async def test_one_timer_refuses_the_calls_still_waiting_for_their_message_and_forgets_every_call() -> None:
    """One timer for every waiting call, instead of one per call: it refuses only those that
    waited past the limit, and no call, served, refused or cancelled, stays in its books."""
    read = _ReadWithin(0.01)
    late, cancelled, served = _Call(), _Call(), _Call()
    waiting = [asyncio.ensure_future(read(None, call)) for call in (late, cancelled, served)]  # type: ignore[arg-type]  # unread
    served.message.set()
    assert await waiting[2] == b"request"
    waiting[1].cancel()
    with pytest.raises(RequestNotRead, match=r"^the request message did not arrive within 0.01 s"):
        await waiting[0]
    assert waiting[1].cancelled()
    assert read._waiting == {} and read._expired == set()  # noqa: SLF001
