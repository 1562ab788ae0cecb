"""MessageView (client-java's message/MessageViewImpl.java): a message as a 5.x consumer receives it,
with what the client needs to ack it (receipt handle, the endpoint it came through).

`corrupted` is set when the body does not match its digest (CRC32, MD5 or SHA1, as the Proxy
computed it), as the official clients flag it; a GZIP body is inflated first. `to_message_ext`
gives the same message in rmqlab's MessageExt form (RocketMQ's property keys), which is what the
client's trace values describe (rmqlab.client.operation_tracer.describe_message).
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from dataclasses import dataclass

from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.proto.v2 import definition_pb2 as pb

MC = MessageConst


def _digest_matches(body: bytes, digest: pb.Digest) -> bool:
    if digest.type == pb.CRC32:  # hex without leading zeros (Long.toHexString)
        try:
            return int(digest.checksum, 16) == zlib.crc32(body) & 0xFFFFFFFF
        except ValueError:
            return False
    if digest.type == pb.MD5:
        return hashlib.md5(body).hexdigest().upper() == digest.checksum.upper()
    if digest.type == pb.SHA1:
        return hashlib.sha1(body).hexdigest().upper() == digest.checksum.upper()
    return True  # no digest to check


@dataclass
class MessageView:
    message_id: str
    topic: str
    body: bytes
    tag: str | None
    keys: tuple[str, ...]
    properties: dict[str, str]
    message_group: str | None
    delivery_attempt: int
    receipt_handle: str
    queue_id: int
    queue_offset: int
    born_timestamp: int
    store_timestamp: int
    store_host: str
    broker_name: str          # the broker of the queue it was received from
    endpoint: str             # the Proxy endpoint it came through, where it is acked
    corrupted: bool = False

    @classmethod
    def from_protobuf(cls, message: pb.Message, broker_name: str, endpoint: str) -> MessageView:
        sp = message.system_properties
        body = bytes(message.body)
        corrupted = False
        if sp.body_encoding == pb.GZIP:
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError):
                corrupted = True
        if not corrupted and sp.HasField("body_digest"):
            corrupted = not _digest_matches(body, sp.body_digest)
        return cls(message_id=sp.message_id, topic=message.topic.name, body=body,
                   tag=sp.tag if sp.HasField("tag") else None, keys=tuple(sp.keys),
                   properties=dict(message.user_properties),
                   message_group=sp.message_group if sp.HasField("message_group") else None,
                   delivery_attempt=sp.delivery_attempt, receipt_handle=sp.receipt_handle, queue_id=sp.queue_id,
                   queue_offset=sp.queue_offset, born_timestamp=sp.born_timestamp.ToMilliseconds(),
                   store_timestamp=sp.store_timestamp.ToMilliseconds(), store_host=sp.store_host,
                   broker_name=broker_name, endpoint=endpoint, corrupted=corrupted)

    def to_message_ext(self) -> MessageExt:
        props = dict(self.properties)
        props[MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self.message_id
        if self.tag is not None:
            props[MC.PROPERTY_TAGS] = self.tag
        if self.keys:
            props[MC.PROPERTY_KEYS] = MC.KEY_SEPARATOR.join(self.keys)
        return MessageExt(topic=self.topic, body=self.body, properties=props, queue_id=self.queue_id,
                          queue_offset=self.queue_offset, reconsume_times=max(0, self.delivery_attempt - 1),
                          born_timestamp=self.born_timestamp, store_timestamp=self.store_timestamp,
                          msg_id=self.message_id)
