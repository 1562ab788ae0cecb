"""RouteWatcher: an operator running `mqadmin topicRoute -t TOPIC` every interval, as a client
node whose answers land in the trace.

A route is what clients act on: which member of each broker group they take for the master (broker
id 0) and whether a group's queues are writeable. With slave acting master (RIP-32) the name server
rewrites it (a slave shown as id 0, read-only), and nothing else in the trace says what clients
were told. So the watcher asks, like any admin client (GET_ROUTEINFO_BY_TOPIC), and records each
answer as a Jepsen-style ``client`` operation ``f = "route"`` whose value is

    {"topic": ..., "groups": {brokerName: {"ids": {"0": addr, ...}, "perm": int}}}

(ids as strings: JSON object keys), or ``fail`` with the error (no route, name server down).
`rmqlab.viz.acting_master.routes(events)` reads them back.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rmqlab.client.admin.default_mq_admin_ext import DefaultMQAdminExt
from rmqlab.client.operation_tracer import OperationTracer
from rmqlab.remoting.protocol.route.topic_route_data import TopicRouteData
from rmqlab.viz.acting_master import ROUTE_OP

def route_value(topic: str, route: TopicRouteData) -> dict[str, Any]:
    perms = {qd.broker_name: qd.perm for qd in route.queue_datas}
    return {"topic": topic,
            "groups": {bd.broker_name: {"ids": {str(i): addr for i, addr in sorted(bd.broker_addrs.items())},
                                        "perm": perms.get(bd.broker_name)}
                       for bd in sorted(route.broker_datas, key=lambda b: b.broker_name)}}


class RouteWatcher:
    """A client of a ClientProcess: every `interval_ms`, the route of `topic` from the name server."""

    def __init__(self, namesrv_addr: str, topic: str, interval_ms: float = 500):
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, not {interval_ms}")
        self.topic = topic
        self.interval_ms = interval_ms
        self.admin = DefaultMQAdminExt(namesrv_addr, admin_ext_group="route_watcher", timeout_millis=3000)
        self._task: asyncio.Task | None = None

    async def start(self, node) -> None:
        self.node = node
        self.tracer = OperationTracer(node)
        await self.admin.start(node)
        self._task = node.spawn(self._run(), name="route-watcher")

    async def _run(self) -> None:
        while True:
            op = self.tracer.invoke(ROUTE_OP, {"topic": self.topic})
            try:
                route = await self.admin.examine_topic_route_info(self.topic)
            except asyncio.CancelledError:
                op.info(None, "stopped")
                raise
            except Exception as e:  # noqa: BLE001 -- every answer, error or not, is a fact for the trace
                op.fail(None, str(e) or type(e).__name__)
            else:
                op.ok(route_value(self.topic, route))
            await self.node.sleep(self.interval_ms)

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        await self.admin.shutdown()

    def on_crash(self) -> None:
        self._task = None
        self.admin.on_crash()
