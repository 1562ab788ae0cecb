"""The part every 5.x client shares (client-java's impl/ClientImpl.java, ClientSessionImpl.java):
who it is, where it connects, its routes, its settings session with each endpoint, heartbeats.

* **Access point**: ClientConfiguration.endpoints ("host:port;host:port"), a Cluster-mode Proxy
  or Local-mode Proxies. QueryRoute asks them in order (the next one when one does not answer)
  and the route names the endpoint of every broker: the one Proxy in Cluster mode, each broker's
  own Proxy in Local mode.
* **Settings** (Telemetry): a bidirectional stream per endpoint in use, opened before the first
  call to it, whose first command is the client's Settings; the Proxy answers with the settings
  it decided (the producer's retry policy, the consumer's long polling) and keeps the client's
  (a Heartbeat or ReceiveMessage needs them) while the stream lives. A stream that ended is
  opened again before the next call to that endpoint. Start-up waits for the first answer.
* **Isolation**: an endpoint a send failed on (or a receive could not reach) is isolated; sends
  and receives avoid it while others are left, and the heartbeat, every 10 s to every endpoint of
  the routes, brings it back once it answers.
* **Routes** are refreshed every 30 s; a failed refresh keeps the old route. (Both periods are
  attributes, `heartbeat_period_ms` and `route_update_period_ms`, that a lab may shorten.)

Metadata of every call: x-mq-client-id, x-mq-language, x-mq-client-version, x-mq-protocol (what
the Proxy reads into its ProxyContext). Deviations: the client id is node@pid@index@clock (Java:
hostname@pid@index@nanotime; pid from the node's seeded random), and the route, heartbeat and
settings traffic is not traced as client operations (only send, receive and ack are, see
operation_tracer); its frames are, on the simulator (FramedConnection).
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqlab.client.grpc.rpc import RpcError, RpcTransport, default_transport
from rmqlab.client.impl.mq_client_manager import MQClientManager
from rmqlab.config.addresses import check_addr_list, split_addr_list
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node

Code = pb.Code
CLIENT_VERSION = "5.1.2"  # the protocol level of the official clients this one follows
HEARTBEAT_PERIOD_MS = 10_000
ROUTE_UPDATE_PERIOD_MS = 30_000
# Codes after which the request may have been carried out (stored, popped): the Proxy's own
# failures and timeouts. Client errors (4xxxx) mean it was not.
MAYBE_DONE_CODES = frozenset({Code.INTERNAL_ERROR, Code.INTERNAL_SERVER_ERROR, Code.HA_NOT_AVAILABLE,
                              Code.PROXY_TIMEOUT, Code.MASTER_PERSISTENCE_TIMEOUT, Code.SLAVE_PERSISTENCE_TIMEOUT})
# How many 5.x clients each node (process) started: the index in their client ids.
_clients_started: weakref.WeakKeyDictionary[Node, int] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ClientConfiguration:
    """ClientConfiguration: the access point and the timeout of each request."""

    endpoints: str
    request_timeout_ms: int = 3000

    def __post_init__(self) -> None:
        problem = check_addr_list(self.endpoints) if isinstance(self.endpoints, str) else "a str"
        if problem is not None:
            raise ValueError(f"endpoints {self.endpoints!r}: expected {problem}")
        if not isinstance(self.request_timeout_ms, int) or self.request_timeout_ms <= 0:
            raise ValueError(f"request_timeout_ms must be a positive int, not {self.request_timeout_ms!r}")

    def endpoint_list(self) -> list[str]:
        return split_addr_list(self.endpoints)


class ClientException(Exception):
    """A failed call: `code` is the Proxy's status code (pb.Code) or None when the transport
    failed (`grpc_code` then names gRPC's status). `maybe_done`: the request may have been
    carried out all the same (a send stored, a receive popped)."""

    def __init__(self, code: int | None, message: str, *, grpc_code: str | None = None, maybe_done: bool = True):
        name = Code.Name(code) if code is not None else grpc_code
        super().__init__(f"[{name}] {message}")
        self.code = code
        self.grpc_code = grpc_code
        self.message = message
        self.maybe_done = maybe_done

    @classmethod
    def from_status(cls, status: pb.Status) -> ClientException:
        return cls(status.code, status.message, maybe_done=status.code in MAYBE_DONE_CODES)

    @classmethod
    def from_rpc(cls, e: RpcError) -> ClientException:
        return cls(None, e.details, grpc_code=e.code, maybe_done=e.sent)


def endpoint_of(endpoints: pb.Endpoints) -> str:
    """The address a call to these Endpoints goes to (the first; a route names one per broker)."""
    a = endpoints.addresses[0]
    return f"{a.host}:{a.port}"


def to_endpoints(endpoint: str) -> pb.Endpoints:
    host, _, port = endpoint.rpartition(":")
    return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])


class _Session:
    """The Telemetry stream with one endpoint."""

    def __init__(self):
        self.stream = None
        self.task: asyncio.Task | None = None
        self.synced = asyncio.Event()  # the first settings answer came (or the stream ended)
        self.ended = False


class Client:
    client_type: int = pb.CLIENT_TYPE_UNSPECIFIED

    def __init__(self, configuration: ClientConfiguration, transport: RpcTransport | None = None):
        self.configuration = configuration
        self.access_point = configuration.endpoint_list()
        self._given_transport = transport
        self.transport: RpcTransport | None = None
        self.node: Node | None = None
        self.client_id = ""
        self.routes: dict[str, list[pb.MessageQueue]] = {}
        self.isolated: set[str] = set()
        self._sessions: dict[str, _Session] = {}
        self._tasks: list[asyncio.Task] = []
        self.running = False
        # Java's fixed periods; a lab may shorten them before start (as it does pollNameServerInterval).
        self.heartbeat_period_ms = HEARTBEAT_PERIOD_MS
        self.route_update_period_ms = ROUTE_UPDATE_PERIOD_MS

    # -- what each kind of client says ------------------------------------------------------------
    def topics(self) -> list[str]:
        return []

    def settings(self) -> pb.Settings:
        return pb.Settings(client_type=self.client_type, access_point=to_endpoints(self.access_point[0]),
                           user_agent=pb.UA(language=pb.PYTHON, version=CLIENT_VERSION, platform="rmqlab",
                                            hostname=self.node.name),
                           request_timeout=duration_of(self.configuration.request_timeout_ms))

    def apply_settings(self, settings: pb.Settings) -> None:
        """The Proxy's answer to the settings (ClientImpl.onSettingsCommand)."""

    def on_recover_orphaned_transaction_command(self, endpoint: str, command) -> None:
        """The Proxy asks about a half message (ClientImpl.onRecoverOrphanedTransactionCommand):
        only a producer with a transaction checker answers."""

    def heartbeat_request(self) -> spb.HeartbeatRequest:
        return spb.HeartbeatRequest(client_type=self.client_type)

    def termination_request(self) -> spb.NotifyClientTerminationRequest:
        return spb.NotifyClientTerminationRequest()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self, node: Node) -> None:
        self.node = node
        self.transport = self._given_transport or default_transport(node)
        self.tracer = MQClientManager.get_instance(node).tracer  # op ids unique within the node
        pid = node.random.getrandbits(15)
        index = _clients_started.get(node, 0)
        _clients_started[node] = index + 1
        self.client_id = f"{node.name}@{pid}@{index}@{_base36(node.now_ms())}"
        self.running = True
        for topic in self.topics():
            try:
                await self.route(topic)
            except ClientException as e:  # the first send or receive asks again
                node.log.warning("%s: no route for %s yet: %s", self.client_id, topic, e)
        endpoints = self.route_endpoints() or self.access_point[:1]
        for endpoint in endpoints:
            self._session(endpoint)
        waits = [asyncio.ensure_future(s.synced.wait()) for s in self._sessions.values()]
        if waits:
            timer = node.call_later(self.configuration.request_timeout_ms, lambda: [w.cancel() for w in waits])
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            timer.cancel()
            for w in waits:
                w.cancel()
        self._tasks.append(node.spawn(self._every(self.heartbeat_period_ms, self._heartbeat), name="grpc heartbeat"))
        self._tasks.append(node.spawn(self._every(self.route_update_period_ms, self._update_routes),
                                      name="grpc route update"))

    async def shutdown(self) -> None:
        """NotifyClientTermination to every endpoint in use, end the sessions, close the connections."""
        if not self.running:
            return
        self.running = False
        for task in self._tasks:
            task.cancel()
        for endpoint in sorted(self._sessions):
            session = self._sessions[endpoint]
            if session.ended or endpoint in self.isolated:
                continue  # nobody to say goodbye to (an isolated endpoint would hold us its timeout)
            try:
                await self.transport.unary(endpoint, "NotifyClientTermination", self.termination_request(),
                                           spb.NotifyClientTerminationResponse, self.metadata(),
                                           self.configuration.request_timeout_ms)
            except RpcError as e:
                self.node.log.info("%s: NotifyClientTermination to %s: %s", self.client_id, endpoint, e)
            if session.stream is not None and not session.ended:
                session.stream.done_writing()  # the Proxy ends the stream and forgets the settings
        for session in self._sessions.values():
            if session.task is not None:
                session.task.cancel()
        await self.transport.close()

    def on_crash(self) -> None:
        self.running = False
        if self.transport is not None:
            self.transport.drop()

    # -- calls -------------------------------------------------------------------------------------
    def metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", self.client_id), ("x-mq-language", "PYTHON"),
                ("x-mq-client-version", CLIENT_VERSION), ("x-mq-protocol", "v2")]

    async def call(self, endpoint: str, method: str, request, response_class: type, timeout_ms: float | None = None):
        """One unary call; RpcError as the transport raises it."""
        self._session(endpoint)
        return await self.transport.unary(endpoint, method, request, response_class, self.metadata(),
                                          timeout_ms or self.configuration.request_timeout_ms)

    # -- routes ------------------------------------------------------------------------------------
    async def route(self, topic: str) -> list[pb.MessageQueue]:
        """The topic's queues, cached; QueryRoute on the access point when unknown."""
        queues = self.routes.get(topic)
        if queues is None:
            queues = await self.query_route(topic)
        return queues

    async def query_route(self, topic: str) -> list[pb.MessageQueue]:
        request = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
        error: ClientException | None = None
        for endpoint in self.access_point:
            request.endpoints.CopyFrom(to_endpoints(endpoint))
            try:
                response = await self.call(endpoint, "QueryRoute", request, spb.QueryRouteResponse)
            except RpcError as e:
                error = ClientException.from_rpc(e)
                continue  # the next address of the access point
            if response.status.code != Code.OK:
                raise ClientException.from_status(response.status)
            queues = list(response.message_queues)
            self._set_route(topic, queues)
            return queues
        assert error is not None
        raise error

    def _set_route(self, topic: str, queues: list[pb.MessageQueue]) -> None:
        self.routes[topic] = queues
        for endpoint in self.route_endpoints():
            self._session(endpoint)  # a new endpoint gets the client's settings first

    def route_endpoints(self) -> list[str]:
        return sorted({endpoint_of(q.broker.endpoints) for queues in self.routes.values() for q in queues})

    async def _update_routes(self) -> None:
        for topic in sorted(self.routes):
            try:
                await self.query_route(topic)
            except ClientException as e:
                self.node.log.info("%s: route update of %s failed, keeping the old one: %s", self.client_id, topic, e)

    # -- settings sessions -------------------------------------------------------------------------
    def _session(self, endpoint: str) -> _Session:
        session = self._sessions.get(endpoint)
        if session is None or session.ended:
            session = self._sessions[endpoint] = _Session()
            session.task = self.node.spawn(self._run_session(endpoint, session), name=f"grpc telemetry {endpoint}")
        return session

    async def _run_session(self, endpoint: str, session: _Session) -> None:
        try:
            session.stream = await self.transport.bidi(endpoint, "Telemetry", spb.TelemetryCommand, self.metadata())
            session.stream.write(spb.TelemetryCommand(settings=self.settings()))
            while (command := await session.stream.read()) is not None:
                if command.HasField("settings"):
                    self.apply_settings(command.settings)
                    session.synced.set()
                elif command.HasField("recover_orphaned_transaction_command"):
                    self.on_recover_orphaned_transaction_command(endpoint,
                                                                 command.recover_orphaned_transaction_command)
        except RpcError as e:
            self.node.log.info("%s: telemetry with %s ended: %s", self.client_id, endpoint, e)
        finally:
            session.ended = True
            session.synced.set()

    # -- heartbeat ----------------------------------------------------------------------------------
    async def _heartbeat(self) -> None:
        endpoints = sorted(set(self.route_endpoints()) | self.isolated)
        await asyncio.gather(*(self._heartbeat_one(e) for e in endpoints))

    async def _heartbeat_one(self, endpoint: str) -> None:
        try:
            response = await self.call(endpoint, "Heartbeat", self.heartbeat_request(), spb.HeartbeatResponse)
        except RpcError:
            return
        if response.status.code == Code.OK and endpoint in self.isolated:
            self.isolated.discard(endpoint)
            self.node.log.info("%s: endpoint %s answers again, no longer isolated", self.client_id, endpoint)

    async def _every(self, period_ms: float, work) -> None:
        while self.running:
            await self.node.sleep(period_ms)
            if self.running:
                await work()


def duration_of(ms: int):
    """A protobuf Duration of `ms` milliseconds."""
    from google.protobuf.duration_pb2 import Duration

    d = Duration()
    d.FromMilliseconds(int(ms))
    return d


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out
