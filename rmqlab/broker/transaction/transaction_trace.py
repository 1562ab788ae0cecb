"""What a reader of the trace needs of a transaction's half message, as ``state`` events of machine
``TransactionalMessage.half`` (the log line RocketMQ writes comes first, for people):

* ``to="CHECKING"`` - CHECK_TRANSACTION_STATE sent (``check_times``, ``producer_group``; ``channel``
  null when no producer of the group was connected: nothing was sent);
* ``to="COMMITTED"`` / ``to="ROLLED_BACK"`` - END_TRANSACTION ended it (``from_transaction_check``;
  COMMITTED with the real message's ``commit_log_offset`` / ``queue_offset``);
* ``to="DISCARDED"`` - the checks ran out (or its file is too old): copied to TRANS_CHECK_MAX_TIME_TOPIC;
* ``to="ESCAPED"`` - a slave acting as master sent it to another group's master.

Every event carries ``uniq_key`` (the producer's message id: the transaction id), ``real_topic``,
``half_offset`` (the half message's commit-log offset) and ``broker_name``. Only brokers that see
transactions emit them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

MACHINE = "TransactionalMessage.half"


def trace_half(broker: BrokerController, msg: MessageExt, to: str, message: str, level: str = "INFO",
               **fields: Any) -> None:
    node = broker.node
    node.trace("log", level=level, message=message, logger="rmqlab.broker.transaction")
    node.trace("state", machine=MACHINE, **{"from": None, "to": to}, component="broker",
               broker_name=broker.broker_config.brokerName,
               uniq_key=msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
               real_topic=msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC),
               half_offset=msg.commit_log_offset, **fields)
