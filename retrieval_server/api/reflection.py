"""Server reflection that also resolves method symbols.

grpcio-reflection answers file_containing_symbol only for services and messages, so clients
that look up ``package.Service.Method`` (ghz, grpcurl) fail on Python servers
(grpc/grpc#34743). This servicer falls back to the method's service file.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from grpc_reflection.v1alpha import _async, _base, reflection_pb2, reflection_pb2_grpc

from retrieval_server.api.edge import Edge

SERVICE_NAME = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"].full_name


class MethodAwareReflectionServicer(_async.ReflectionServicer):
    def _file_containing_symbol(self, request, fully_qualified_name):  # type: ignore[no-untyped-def]
        response = super()._file_containing_symbol(request, fully_qualified_name)
        if not response.HasField("error_response"):
            return response
        try:
            method = self._pool.FindMethodByName(fully_qualified_name)
        except KeyError:
            return response
        return _base._file_descriptor_response(method.containing_service.file, request)


def enable_reflection(service_names: Iterable[str], server: grpc.aio.Server | Edge) -> None:
    names = [*service_names, SERVICE_NAME]
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(MethodAwareReflectionServicer(names), server)
