"""The transport floor: a bare grpc.aio server with one unary method and nothing else.

    python -m bench.floor.echo --port 50999 --answers answers.pickle [--loop uvloop]

It decodes each request as a ``QueryRequest`` and answers with the ``QueryResponse`` the service
served to the same query (real answers captured from the service's cache, so both servers send
the same bytes for each query), looked up by the query's text and encoded for every call, as a
plain unary method does: no interceptor, no validation, no workflow; a query it was not given
gets the first answer. What gRPC, protobuf and one Python event loop cost on this machine. The
standard asyncio loop by default (the floor as the performance issue defines it); ``--loop
uvloop`` runs it on the loop the service uses.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import signal
from pathlib import Path
from typing import get_args

import grpc

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server import event_loop

SERVICE = "bench.floor.Echo"
METHOD = "Echo"
PATH = f"/{SERVICE}/{METHOD}"


def handler(answers: dict[bytes, bytes]) -> grpc.GenericRpcHandler:
    """``answers``: serialized request -> serialized response, as bench.floor captures them; the
    first is also the answer to any other query (none: an empty response)."""
    by_query = {pb.QueryRequest.FromString(k).query: pb.QueryResponse.FromString(v) for k, v in answers.items()}
    if len(by_query) != len(answers):
        # Looked up by text, two requests of one query (another top_k, say) would get one answer.
        raise ValueError("the answers hold several requests of one query text: the echo tells queries apart by text only")
    fallback = next(iter(by_query.values()), pb.QueryResponse())

    async def echo(request: pb.QueryRequest, context: grpc.aio.ServicerContext) -> pb.QueryResponse:
        return by_query.get(request.query, fallback)

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {METHOD: grpc.unary_unary_rpc_method_handler(echo, request_deserializer=pb.QueryRequest.FromString,
                                                     response_serializer=pb.QueryResponse.SerializeToString)},
    )


async def start(answers: dict[bytes, bytes], host: str = "127.0.0.1", port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler(answers),))
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    return server, bound


async def _serve(answers: dict[bytes, bytes], port: int) -> None:
    server, bound = await start(answers, port=port)
    print(f"listening on 127.0.0.1:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.floor.echo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--answers", type=Path, help="a pickled dict of serialized QueryRequest -> serialized QueryResponse, as written by "
                   "bench.floor (default: none, every answer an empty response)")
    p.add_argument("--loop", choices=get_args(event_loop.EventLoop), default="asyncio", help="the event loop (default: the standard one)")
    args = p.parse_args(argv)
    answers = pickle.loads(args.answers.read_bytes()) if args.answers else {}
    event_loop.run(_serve(answers, args.port), args.loop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
