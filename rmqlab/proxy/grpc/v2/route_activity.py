"""RouteActivity (proxy/grpc/v2/route/RouteActivity.java): QueryRoute and QueryAssignment.

QueryRoute lists, for every broker (every replica, not only masters: the client keeps only
brokerId 0), queues split into read-only, write-only, read-write and no-permission ones exactly as
genMessageQueueFromQueueData does, each accepting only the topic's message type (MIXED: all
four). QueryAssignment answers one assignment per readable broker with queue id -1 ("pop from any
queue"), or every queue when the group is FIFO.
"""

from __future__ import annotations

from rmqlab.common.constant.perm_name import PermName
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.common import Code, build_status
from rmqlab.proxy.grpc.v2.grpc_validator import validate_consumer_group, validate_topic
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext
from rmqlab.proxy.service.topic_route_service import ProxyBroker

ACCEPT_TYPES = {
    "NORMAL": [pb.NORMAL], "FIFO": [pb.FIFO], "DELAY": [pb.DELAY], "TRANSACTION": [pb.TRANSACTION],
    "MIXED": [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION],
}


def to_permission(perm: int) -> int:
    r, w = PermName.is_readable(perm), PermName.is_writeable(perm)
    return pb.READ_WRITE if r and w else pb.READ if r else pb.WRITE if w else pb.NONE


def to_broker(b: ProxyBroker) -> pb.Broker:
    return pb.Broker(name=b.name, id=b.broker_id, endpoints=pb.Endpoints(
        scheme=pb.IPv4, addresses=[pb.Address(host=h, port=p) for h, p in b.endpoints]))


def request_addresses(endpoints: pb.Endpoints) -> list[tuple[str, int]]:
    return [(a.host, a.port) for a in endpoints.addresses]


def gen_message_queues(qd, topic: pb.Resource, topic_type: str, broker: pb.Broker) -> list[pb.MessageQueue]:
    perm = qd.perm
    r = w = rw = n = 0
    if PermName.is_writeable(perm) and PermName.is_readable(perm):
        rw = min(qd.write_queue_nums, qd.read_queue_nums)
        r, w = qd.read_queue_nums - rw, qd.write_queue_nums - rw
    elif PermName.is_writeable(perm):
        w = qd.write_queue_nums
    elif PermName.is_readable(perm):
        r = qd.read_queue_nums
    else:  # PermName.isAccessible is false
        n = max(1, qd.write_queue_nums, qd.read_queue_nums)
    accept = ACCEPT_TYPES.get(topic_type, [pb.NORMAL])
    out: list[pb.MessageQueue] = []
    for count, permission in ((r, pb.READ), (w, pb.WRITE), (rw, pb.READ_WRITE), (n, pb.NONE)):
        for _ in range(count):
            out.append(pb.MessageQueue(topic=topic, id=len(out), permission=permission, broker=broker,
                                       accept_message_types=accept))
    return out


class RouteActivity:
    def __init__(self, processor):
        self.processor = processor

    async def query_route(self, ctx: ProxyContext, request: spb.QueryRouteRequest) -> spb.QueryRouteResponse:
        validate_topic(request.topic)
        topic = request.topic.name
        route, brokers = await self.processor.routes.get_topic_route_for_proxy(
            request_addresses(request.endpoints), topic)
        topic_type = await self.processor.metadata.get_topic_message_type(topic)
        queues: list[pb.MessageQueue] = []
        for qd in route.queue_datas:
            replicas = brokers.get(qd.broker_name)
            if replicas is None:
                break  # RocketMQ stops here too
            for b in replicas.values():
                queues.extend(gen_message_queues(qd, request.topic, topic_type, to_broker(b)))
        return spb.QueryRouteResponse(status=build_status(Code.OK), message_queues=queues)

    async def query_assignment(self, ctx: ProxyContext,
                               request: spb.QueryAssignmentRequest) -> spb.QueryAssignmentResponse:
        validate_topic(request.topic)
        validate_consumer_group(request.group)
        route, brokers = await self.processor.routes.get_topic_route_for_proxy(
            request_addresses(request.endpoints), request.topic.name)
        config = await self.processor.metadata.get_subscription_group_config(request.group.name)
        fifo = bool(config is not None and config.consume_message_orderly)
        assignments = []
        for qd in route.queue_datas:
            if not (PermName.is_readable(qd.perm) and qd.read_queue_nums > 0):
                continue
            master = brokers.get(qd.broker_name, {}).get(0)
            if master is None:
                continue
            broker, permission = to_broker(master), to_permission(qd.perm)
            ids = range(qd.read_queue_nums) if fifo else (-1,)
            assignments.extend(pb.Assignment(message_queue=pb.MessageQueue(
                topic=request.topic, id=i, permission=permission, broker=broker)) for i in ids)
        if not assignments:
            return spb.QueryAssignmentResponse(status=build_status(Code.FORBIDDEN, "no readable queue"))
        return spb.QueryAssignmentResponse(status=build_status(Code.OK), assignments=assignments)
