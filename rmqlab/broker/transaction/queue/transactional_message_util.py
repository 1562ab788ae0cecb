"""TransactionalMessageUtil (RocketMQ ``broker/.../transaction/queue/TransactionalMessageUtil.java``):
names and the half -> real message conversions shared by the processor, the check and the
EscapeBridge."""

from __future__ import annotations

from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import message_properties_to_string
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.topic.topic_validator import TopicValidator

REMOVE_TAG = "d"            # the op message's tag (REMOVETAG before 5.1.0)
OFFSET_SEPARATOR = ","      # between the half offsets of one op message's body
CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"  # MixAll: the cursors on the half and op queues
TRANS_CHECK_MAX_TIME_TOPIC = TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC


def build_half_topic() -> str:
    return TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC


def build_op_topic() -> str:
    return TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC


def build_consumer_group() -> str:
    return CID_RMQ_SYS_TRANS


def get_immunity_time(check_immunity_time_str: str | None, transaction_timeout: int) -> int:
    """``TransactionalMessageServiceImpl.getImmunityTime`` (the check): the producer's
    CHECK_IMMUNITY_TIME_IN_SECONDS in ms, with no floor (a value below transactionTimeOut wins);
    transactionTimeOut when absent or not a number."""
    if check_immunity_time_str is None:
        return transaction_timeout
    try:
        return int(check_immunity_time_str) * 1000
    except ValueError:
        return transaction_timeout


def get_immunity_time_with_floor(check_immunity_time_str: str, transaction_timeout: int) -> int:
    """``TransactionalMessageUtil.getImmunityTime`` (END_TRANSACTION's check): the same value,
    but never below transactionTimeOut (0 when not a number, hence transactionTimeOut)."""
    try:
        value = int(check_immunity_time_str) * 1000
    except ValueError:
        value = 0
    return max(value, transaction_timeout)


def build_transactional_message_from_half_message(msg_ext: MessageExt) -> MessageExtBrokerInner:
    """``buildTransactionalMessageFromHalfMessage``: a half message as a new half message of its real
    topic (``TRAN_MSG=true``, PREPARED sysFlag), what the EscapeBridge sends to another group's
    master, whose SendMessageProcessor stores it as that master's half message."""
    props = dict(msg_ext.properties)
    inner = MessageExtBrokerInner(topic=props.get(MessageConst.PROPERTY_REAL_TOPIC) or msg_ext.topic,
                                  body=msg_ext.body, flag=msg_ext.flag)
    inner.msg_id = msg_ext.msg_id
    real_qid = props.get(MessageConst.PROPERTY_REAL_QUEUE_ID)
    if real_qid is not None and real_qid.isdigit():
        inner.queue_id = java_parse_int(real_qid)
    inner.born_timestamp = msg_ext.born_timestamp
    inner.born_host = msg_ext.born_host
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
    props.pop(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, None)
    props.pop(MessageConst.PROPERTY_REAL_QUEUE_ID, None)
    inner.properties = props
    inner.properties_string = message_properties_to_string(props)
    inner.sys_flag = msg_ext.sys_flag | MessageSysFlag.TRANSACTION_PREPARED_TYPE
    return inner
