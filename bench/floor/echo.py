"""The transport floor: a bare grpc.aio server with one unary method and nothing else.

    python -m bench.floor.echo --port 50999 --response response.bin [--loop uvloop]

It decodes each request as a ``QueryRequest`` and answers with the same prepared
``QueryResponse`` every time (a real answer captured from the service, so both servers send the
same bytes): what gRPC, protobuf and one Python event loop cost on this machine, with no
interceptor, no validation, no workflow. The standard asyncio loop by default (the floor as the
performance issue defines it); ``--loop uvloop`` runs it on the loop the service uses.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path
from typing import get_args

import grpc

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server import event_loop

SERVICE = "bench.floor.Echo"
METHOD = "Echo"
PATH = f"/{SERVICE}/{METHOD}"


def handler(response: pb.QueryResponse) -> grpc.GenericRpcHandler:
    async def echo(request: pb.QueryRequest, context: grpc.aio.ServicerContext) -> pb.QueryResponse:
        return response

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {METHOD: grpc.unary_unary_rpc_method_handler(echo, request_deserializer=pb.QueryRequest.FromString,
                                                     response_serializer=pb.QueryResponse.SerializeToString)},
    )


async def start(response: pb.QueryResponse, host: str = "127.0.0.1", port: int = 0) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler(response),))
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    return server, bound


async def _serve(response: pb.QueryResponse, port: int) -> None:
    server, bound = await start(response, port=port)
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
    p.add_argument("--response", type=Path, help="a serialized QueryResponse to answer with (default: an empty one)")
    p.add_argument("--loop", choices=get_args(event_loop.EventLoop), default="asyncio", help="the event loop (default: the standard one)")
    args = p.parse_args(argv)
    response = pb.QueryResponse.FromString(args.response.read_bytes()) if args.response else pb.QueryResponse()
    event_loop.run(_serve(response, args.port), args.loop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
