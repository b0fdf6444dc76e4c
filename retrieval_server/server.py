"""The grpc.aio server: RetrievalService, grpc.health.v1, and reflection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection_pb2

from retrieval.v1 import retrieval_pb2
from retrieval_server import early_stop, event_loop
from retrieval_server.api.admission import CallsPerPeer, admit
from retrieval_server.api.audit import cut_short, refused
from retrieval_server.api.reflection import enable_reflection
from retrieval_server.api.auth import Authenticate, Authenticator, authenticator_for
from retrieval_server.api.edge import Edge
from retrieval_server.api.identity import MAX_AUTHORIZATION_BYTES, MAX_IDENTITY_HEADER_BYTES
from retrieval_server.api.errors import abort
from retrieval_server.api.servicer import RetrievalServicer, register
from retrieval_server.api.tls import server_credentials
from retrieval_server.api.undecodable import reject_undecodable, request_bytes
from retrieval_server.app import Application
from retrieval_server.config import Settings, bind_error, listen_address
from retrieval_server.domain import ComponentState, HealthReport, InvalidArgument
from retrieval_server.observability.logging import UNDECODABLE_HEADERS
from retrieval_server.observability.metrics import metrics_address, metrics_tls
from retrieval_server.observability.grpc_metrics import GrpcMetricsLayer

log = logging.getLogger(__name__)

SERVICE_NAME = retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"].full_name
HEALTH_SERVICE_NAME = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name


@dataclass(slots=True)
class RunningServer:
    server: grpc.aio.Server
    health: health_aio.HealthServicer
    port: int
    app: Application
    #: the /metrics port, or None when metrics are off
    metrics_port: int | None = None
    #: the plaintext server answering grpc.health.v1 alone on RETRIEVAL_HEALTH_PORT, if set
    health_server: grpc.aio.Server | None = None
    authenticator: Authenticator | None = None
    #: keeps grpc.health.v1's RetrievalService status in line with the required stores
    health_follower: asyncio.Task[None] | None = None

    async def stop(self, grace_s: float) -> None:
        """Stop accepting, let in-flight calls finish within ``grace_s``, then close the backends."""
        if self.health_follower is not None:
            self.health_follower.cancel()
            await asyncio.gather(self.health_follower, return_exceptions=True)  # whatever ended it, the server still stops
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_s)
        if self.health_server is not None:
            await self.health_server.stop(None)
        if self.authenticator is not None:
            await self.authenticator.close()
        await self.app.close()


async def start_server(settings: Settings, app: Application | None = None) -> RunningServer:
    """Open the application (unless given an open one), bind, and start serving."""
    opening = app is None
    if app is None:
        app = Application(settings)
        # Built before anything opens, so that a bad workflow setting (an LLM provider's URL, the
        # glossary) is refused with nothing to close, and before the model is chosen or timed.
        _ = app.pipeline
    try:
        if opening:
            await app.open()
        return await _serving(settings, app)
    except BaseException:
        # A failure, or a stop while it starts (serve's cancellation): nothing opened may outlive it.
        await app.close()
        raise


#: a call's metadata, at most: x-user-id, x-user-role and x-user-groups at their limit, a token at
#: its own, and 64 KiB more for the other headers (:path, user-agent, ...) and HPACK's 32 bytes an
#: entry. Above the per-header limits, so that those refuse a header too long, naming it: held to
#: one header's limit, gRPC reset a call with a header at it (RESOURCE_EXHAUSTED, naming nothing).
MAX_METADATA_BYTES = 3 * MAX_IDENTITY_HEADER_BYTES + MAX_AUTHORIZATION_BYTES + 64 * 1024


#: calls in flight on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)
MAX_STREAMS_PER_CONNECTION = 100
#: how long a connection takes new calls, and how long after that its calls in flight may run
MAX_CONNECTION_AGE_S = 30 * 60
CONNECTION_AGE_GRACE_S = 60 * 60
#: what every connection to either of our ports is held to, whoever the caller
TRANSPORT_LIMITS: list[tuple[str, int]] = [
    # Uncompressed requests only (bit 0: identity). gRPC inflates a compressed message whole, on
    # the event loop and before our size check and authentication: 64 KB of gzip made 63 MiB and
    # held every caller's call for seconds. A compressed request is UNIMPLEMENTED at once.
    ("grpc.compression_enabled_algorithms_bitset", 1),
    # Calls at once on one connection: gRPC allowed any number, and 1,000 Query streams stalled
    # on one connection held 1 GB. A stream opened beyond them is refused (REFUSED_STREAM): gRPC's
    # clients may open one before they have read this setting, and a burst past it gets UNAVAILABLE.
    ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
    # A connection is asked to go (GOAWAY) after this long, its clients opening another for new
    # calls, and closed once the calls it still carries have had the grace. The grace is the longest a setting lets a call's work wait (an hour:
    # ANSWER_TIMEOUT_S, LLM_TIMEOUT_S, ...); a call outliving it (a Health Watch, an ingest
    # without a deadline of more than embeds in that time) ends UNAVAILABLE "max connection age".
    ("grpc.max_connection_age_ms", MAX_CONNECTION_AGE_S * 1000),
    ("grpc.max_connection_age_grace_ms", CONNECTION_AGE_GRACE_S * 1000),
]


#: the longest service name a health Check or Watch may ask about: the longest served here. A
#: Watch holds its request as long as it lasts, an unknown name's too: 150 of 1.9 MB names held
#: 900 MB for a caller without credentials.
MAX_HEALTH_SERVICE_CHARS = len(SERVICE_NAME)

#: how long a Watch started once the shutdown began stays open after its status: gRPC's client-side
#: health checking starts a Watch again as soon as one ends, and the health port, stopped after the
#: main drain, went on taking them (2,955 in a 2 s drain, from one connection)
WATCH_AFTER_SHUTDOWN_S = 1.0


class _Health(health_aio.HealthServicer):
    """grpc.health.v1, refusing a service name no service served here could have; a Watch open when
    the shutdown begins ends (OK) once it has sent the shutdown's status, and one started after
    ends :data:`WATCH_AFTER_SHUTDOWN_S` after its status (or at the server's stop).

    grpc's Watch never ends: one open at a stop (gRPC's client-side health checking keeps one on
    every connection) held the drain for the whole grace period, an idle server's too, and was then
    cancelled (UNAVAILABLE). Its loop is grpc's (grpcio-health-checking 1.85), on its state, with
    those ends added."""

    def __init__(self) -> None:
        super().__init__()
        #: every status is the shutdown's (NOT_SERVING): a Watch ends once it has sent its own
        self._shutdown_statuses_set = False

    async def Check(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        await _refuse_a_long_name(request, context)
        return await super().Check(request, context)  # type: ignore[no-any-return]

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> None:
        await _refuse_a_long_name(request, context)
        after_shutdown = self._gracefully_shutting_down
        condition = self._server_watchers[request.service]
        self._watcher_count_by_service[request.service] += 1
        sent = None
        try:
            async with condition:
                while True:
                    status = self._server_status.get(request.service, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
                    if status != sent:
                        await context.write(health_pb2.HealthCheckResponse(status=status))
                        sent = status
                    if self._shutdown_statuses_set:
                        if after_shutdown:
                            # Ended at once, it was started again at once, for as long as the drain lasted.
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(condition.wait(), WATCH_AFTER_SHUTDOWN_S)
                        return  # no status comes after the shutdown's
                    await condition.wait()
        finally:
            self._watcher_count_by_service[request.service] -= 1
            if self._watcher_count_by_service[request.service] == 0:
                del self._server_watchers[request.service]
                del self._watcher_count_by_service[request.service]

    async def enter_graceful_shutdown(self) -> None:
        await super().enter_graceful_shutdown()
        self._shutdown_statuses_set = True
        # A Watch of a service not served (SERVICE_UNKNOWN) waits on a condition grpc's shutdown
        # does not notify; and one that saw the shutdown begin before its status was set (grpc
        # raises its flag first, then sets each status under each Watch's lock) waits for this.
        for condition in list(self._server_watchers.values()):
            async with condition:
                condition.notify_all()


async def _refuse_a_long_name(request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> None:
    if len(request.service) > MAX_HEALTH_SERVICE_CHARS:
        await abort(context, InvalidArgument(f"service must be at most {MAX_HEALTH_SERVICE_CHARS} characters (got {len(request.service)}): "
                                             "no service here has a longer name", field="service"))


async def _serving(settings: Settings, app: Application) -> RunningServer:
    """:func:`_start`, and on any failure of it (a port taken, /metrics unable to bind, a stop while
    it starts) every server it made stopped and the authenticator closed: the caller closes the
    application, /metrics with it. The gRPC server, its port added, was left behind holding it."""
    authenticator = authenticator_for(settings)
    servers: list[grpc.aio.Server] = []
    try:
        return await _start(settings, app, authenticator, servers)
    except BaseException:
        for server in reversed(servers):
            await server.stop(None)
        await authenticator.close()
        raise


async def _start(settings: Settings, app: Application, authenticator: Authenticator, servers: list[grpc.aio.Server]) -> RunningServer:
    """Bind and start serving; each server made is added to ``servers`` as soon as it exists."""
    app.signing_keys = authenticator.signing_keys  # Health's auth component asks whether keys are held
    max_bytes = settings.max_message_mb * 1024 * 1024
    servers.append(server := grpc.aio.server(
        interceptors=app.tracing.server_interceptors(),
        # Calls in progress across every connection: the per-connection cap alone let any number of
        # connections each hold 100 (4 of stalled StreamQuery calls held 432 MiB). One more is
        # answered RESOURCE_EXHAUSTED by gRPC before any handler, and the caller may try again.
        maximum_concurrent_rpcs=settings.max_concurrent_calls,
        options=[
            # What a caller may send. Answers are bounded by the server's own limits (top_k_max and
            # each field's); capped at this too, a valid request would fail after all its work
            # whenever the limit is set low. gRPC sends any size by default.
            ("grpc.max_receive_message_length", max_bytes),
            # The supervisor's workers share a port (it holds the port for them); a server of its own
            # must fail on a port in use, or the kernel would split connections between two indexes.
            ("grpc.so_reuseport", 1 if settings.processes > 1 else 0),
            # What a caller's metadata may hold: x-user-groups of MAX_GROUPS names is up to 256 KB,
            # a token's groups claim of as many 344 KB. gRPC's 8 KiB soft limit refused 400 groups
            # at random, RESOURCE_EXHAUSTED naming nothing, before the limit that names the header.
            ("grpc.max_metadata_size", MAX_METADATA_BYTES),
            ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
            *TRANSPORT_LIMITS,
        ],
    ))
    # Admission first, so that no call holds a slot beyond its share or waiting for its request;
    # then metrics, so that calls refused after are counted; identity before any servicer runs.
    edge = Edge([
        admit(settings.request_read_s, CallsPerPeer(settings.max_calls_per_peer), on_refused=refused, on_cut_short=cut_short),
        GrpcMetricsLayer(app.metrics.grpc),
        reject_undecodable(settings.max_documents_per_request, request_bytes(settings.query_max_bytes, settings.max_documents_per_request),
                           on_refused=refused),
        Authenticate(authenticator, on_refused=refused),
    ])
    # A process serves one application; the count of its grpc log lines dropped goes to its metrics.
    UNDECODABLE_HEADERS.count = app.metrics.undecodable_headers.inc
    register(RetrievalServicer(app), edge)
    health = _Health()
    health_pb2_grpc.add_HealthServicer_to_server(health, edge)
    enable_reflection([SERVICE_NAME, HEALTH_SERVICE_NAME], edge)
    edge.serve_on(server)
    app.metrics.grpc.preregister(
        [retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"], health_pb2.DESCRIPTOR.services_by_name["Health"],
         reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]]
    )
    credentials = server_credentials(settings)
    address = listen_address(settings.host, settings.port)
    _refuse_a_port_in_use(settings, settings.port, f"cannot listen on {address}")
    metrics_port = None
    if settings.metrics_enabled:
        try:
            metrics_port = app.metrics.serve(metrics_address(settings), settings.metrics_port, **metrics_tls(settings))
        except OSError as exc:
            raise OSError(f"cannot serve metrics on {listen_address(metrics_address(settings), settings.metrics_port)}: {exc}") from exc
    # Nothing between adding the port and starting: grpc.aio releases an added port only when a
    # started server stops (stop() before start() left it bound until the process ended).
    try:
        port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {address}: {bind_error(settings.host, settings.port) or 'the address could not be bound'}")
    await _start_whole(server)
    health_server = await _health_only_server(settings, health, servers) if settings.health_port else None
    # Readiness from a first report, not SERVING until the follower's first one: in jwt mode with an
    # identity provider down, a readiness probe said SERVING for HEALTH_INTERVAL_S after start-up
    # while every call with a token was UNAVAILABLE.
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    report = await app.health()
    if not report.serving:
        _log_readiness(report)
    await health.set(SERVICE_NAME, _readiness(report.serving))
    follower = asyncio.create_task(_follow_health(app, health, settings.health_interval_s, report.serving))
    log.info("serving", extra={"address": listen_address(settings.host, port), "metrics_port": metrics_port, "vector_store": settings.vector_backend,
                               "metadata_store": settings.metadata_backend, "model": app.embedder.model_id,
                               "transport": "mutual TLS" if settings.tls_client_ca else "TLS" if credentials else "plaintext",
                               "auth_mode": settings.auth_mode, "event_loop": event_loop.running()})
    if settings.auth_mode == "none":
        log.warning("identity is not authenticated: x-user-id, x-user-role and x-user-groups are believed as sent (RETRIEVAL_AUTH_MODE=none); "
                    "use jwt or gateway wherever the port is reachable by others")
    return RunningServer(server, health, port, app, metrics_port, health_server, authenticator, follower)


def _refuse_a_port_in_use(settings: Settings, port: int, what: str) -> None:
    """Fail, as ``what``, when any address of the listen host is taken on ``port``: gRPC serves once
    one of them binds, beside another server holding the rest. A supervisor's workers are spared:
    it made this check, and holds the port for them."""
    if settings.processes == 1 and (why := bind_error(settings.host, port)):
        raise OSError(f"{what}: {why}")


async def _follow_health(app: Application, health: health_aio.HealthServicer, interval_s: float, serving: bool) -> None:
    """RetrievalService's grpc.health.v1 status follows the components queries cannot do without
    (the vector and metadata stores; in jwt mode with a JWKS URL, its signing keys): NOT_SERVING while one fails, so that a load balancer or a
    readiness probe (which ask this service by name) stop sending queries this process cannot
    answer. The overall status ("") stays SERVING: the process is alive, and restarting it would
    not bring a store back. ``serving``: the status set at start-up."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            report = await app.health()
            if report.serving != serving:
                serving = report.serving
                _log_readiness(report)
                await health.set(SERVICE_NAME, _readiness(serving))
        except Exception:
            log.exception("following the stores' health failed; trying again")


def _readiness(serving: bool) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
    return health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING


def _log_readiness(report: HealthReport) -> None:
    failing = [c.name for c in report.components if c.required and c.state is ComponentState.FAILING]
    if failing:
        log.warning("RetrievalService not serving: %s failing", ", ".join(failing))
    else:
        log.info("RetrievalService serving again")


async def _health_only_server(settings: Settings, health: health_aio.HealthServicer, servers: list[grpc.aio.Server]) -> grpc.aio.Server:
    """grpc.health.v1 alone, plaintext: Kubernetes' gRPC probes cannot speak TLS. Added to
    ``servers`` as soon as it exists, for the caller to stop should the start-up fail."""
    servers.append(server := grpc.aio.server(options=[("grpc.so_reuseport", 1 if settings.processes > 1 else 0), *TRANSPORT_LIMITS]))
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    what = f"cannot listen on the health port {listen_address(settings.host, settings.health_port)}"
    _refuse_a_port_in_use(settings, settings.health_port, what)
    try:
        port = server.add_insecure_port(listen_address(settings.host, settings.health_port))
    except RuntimeError:
        port = 0
    if port == 0:
        raise OSError(f"{what}: {bind_error(settings.host, settings.health_port) or 'the address could not be bound'}")
    await _start_whole(server)
    return server


async def _start_whole(server: grpc.aio.Server) -> None:
    """``server.start()`` run to its end, a cancellation raised once it is: grpc.aio's start cancelled
    halfway leaves a server whose stop() raises InvalidStateError, which the start-up's clean-up
    raised in place of the cancellation, stopping none of the servers after it."""
    start = asyncio.ensure_future(server.start())
    try:
        await asyncio.shield(start)
    except asyncio.CancelledError:
        await start
        raise


async def serve(settings: Settings, on_ready: Callable[[], None] | None = None, on_stopping: Callable[[], None] | None = None) -> None:
    """Run until SIGTERM, SIGINT or SIGHUP, then shut down gracefully. ``on_ready`` is called once
    serving, ``on_stopping`` once a signal came, before the drain. SIGHUP is left alone where it is
    ignored: by a supervisor's worker, whose stop comes as SIGTERM, and under ``nohup``."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before it starts: a SIGTERM as it comes up (a supervisor killed as its workers start) ended it
    # at once, without its cleanup. SIGHUP too (the terminal closed): its default ended the server
    # with calls in flight.
    stop_signals = [signal.SIGTERM, signal.SIGINT]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        stop_signals.append(signal.SIGHUP)
    for sig in stop_signals:
        loop.add_signal_handler(sig, stop.set)
    if early_stop.requested():
        stop.set()  # it came before the handlers: the start-up is given up at once
    starting = asyncio.ensure_future(start_server(settings))
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        # The start-up is given up, closing what it opened: waiting for it, a start that hangs (on
        # a store that does not answer) could only be ended by SIGKILL.
        log.info("stopped while starting")
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        return
    stopping.cancel()
    running = starting.result()
    if on_ready is not None:
        on_ready()
    await stop.wait()
    if on_stopping is not None:
        on_stopping()
    log.info("shutting down", extra={"grace_s": settings.grace_period_s})
    await running.stop(settings.grace_period_s)
    log.info("stopped")
