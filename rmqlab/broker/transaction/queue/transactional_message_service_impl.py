"""TransactionalMessageServiceImpl (RocketMQ ``broker/.../transaction/queue/TransactionalMessageServiceImpl.java``).

* ``prepare_message``: the half message into RMQ_SYS_TRANS_HALF_TOPIC queue 0 (the bridge);
* ``commit_message`` / ``rollback_message``: the half message an END_TRANSACTION names, by its
  commit-log offset (missing: SYSTEM_ERROR "Find prepared transaction message failed");
* ``delete_prepare_message``: its op entry, batched (``transactional_op_batch_service``);
* ``check``: per half queue, from the CID_RMQ_SYS_TRANS cursor:

  1. op messages (32 at a time from the op cursor) say which half offsets have ended;
  2. walk the half offsets: an ended one is skipped; on a slave acting as master (RIP-32) the half
     message is escaped through the EscapeBridge (which sends it as a half message to another
     group's master, whose own check then asks the producer) and the walk goes on (an escape that
     fails sleeps ``100 * (2 ^ n)`` ms, Java's XOR kept, and is given up after 10 tries); one
     checked ``transactionCheckMax`` times, or older than ``fileReservedTime`` hours, goes to
     TRANS_CHECK_MAX_TIME_TOPIC (the listener); one stored after this run began stops the walk,
     one younger than its immunity (``transactionTimeOut``, or the producer's
     CHECK_IMMUNITY_TIME_IN_SECONDS) stops it too (with a custom immunity it is re-appended as an
     immunity copy carrying TRAN_PREPARED_QUEUE_OFFSET, unless that offset has ended);
  3. a message to check is first re-appended to the half queue (its TRANSACTION_CHECK_TIMES + 1),
     and CHECK_TRANSACTION_STATE names that copy's offsets; the producer's answer ends the copy;
  4. the half cursor moves past the walk; the op cursor past the contiguous ended prefix.

Per queue a walk lasts at most 60 s (MAX_PROCESS_TIME_LIMIT) of the node's clock.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.broker.transaction.operation_result import OperationResult
from rmqlab.broker.transaction.queue.transactional_message_bridge import TransactionalMessageBridge
from rmqlab.broker.transaction.queue.transactional_message_util import (
    OFFSET_SEPARATOR, REMOVE_TAG, build_half_topic, build_op_topic, get_immunity_time)
from rmqlab.broker.transaction.queue.transactional_op_batch_service import TransactionalOpBatchService
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.config.broker import BrokerRole
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.broker.transaction.abstract_transactional_message_check_listener import (
        AbstractTransactionalMessageCheckListener)
    from rmqlab.remoting.protocol.header.end_transaction_request_header import EndTransactionRequestHeader

log = logging.getLogger("rmqlab.broker")

MAX_PROCESS_TIME_LIMIT = 60_000
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
MAX_RETRY_TIMES_FOR_ESCAPE = 10
OP_MSG_PULL_NUMS = 32
SLEEP_WHILE_NO_OP = 1000

# GetMessageStatus -> PullStatus as TransactionalMessageBridge.getMessage maps it: what check branches on.
_NO_NEW_MSG = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE)
_OFFSET_ILLEGAL = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                   GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.MESSAGE_WAS_REMOVING,
                   GetMessageStatus.OFFSET_FOUND_NULL)


class TransactionalMessageServiceImpl:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.bridge = TransactionalMessageBridge(broker)
        self.op_batch_service = TransactionalOpBatchService(broker, self.bridge)

    # -- prepare / end ------------------------------------------------------------------------
    async def prepare_message(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        """``asyncPrepareMessage``: the half message as the bridge stores it."""
        return await self.bridge.put_message_return_result(self.bridge.parse_half_message_inner(msg))

    def _get_half_message_by_offset(self, commit_log_offset: int) -> OperationResult:
        msg = self.bridge.look_message_by_offset(commit_log_offset)
        if msg is not None:
            return OperationResult(msg, None, ResponseCode.SUCCESS)
        return OperationResult(None, "Find prepared transaction message failed", ResponseCode.SYSTEM_ERROR)

    def commit_message(self, header: EndTransactionRequestHeader) -> OperationResult:
        return self._get_half_message_by_offset(header.commit_log_offset)

    def rollback_message(self, header: EndTransactionRequestHeader) -> OperationResult:
        return self._get_half_message_by_offset(header.commit_log_offset)

    async def delete_prepare_message(self, msg_ext: MessageExt) -> bool:
        """``deletePrepareMessage``: the op entry of ``msg_ext`` (its half queue offset), batched."""
        ok = await self.op_batch_service.delete_prepare_message(msg_ext.queue_id, msg_ext.queue_offset)
        if not ok:
            log.error("Transaction op message write failed. messageExt: %s", msg_ext.msg_id)
        return ok

    def shutdown(self) -> None:
        self.op_batch_service.shutdown()

    # -- check --------------------------------------------------------------------------------
    def _fill_op_remove_map(self, remove_map: dict[int, int], op_queue_id: int, pull_offset_of_op: int,
                            mini_offset: int, op_msg_map: dict[int, set[int]], done_op_offset: list[int]):
        """``fillOpRemoveMap``: (status, next begin offset, op messages)."""
        status, next_begin, op_msgs = self.bridge.get_op_message(op_queue_id, pull_offset_of_op, OP_MSG_PULL_NUMS)
        if status in _OFFSET_ILLEGAL or status is GetMessageStatus.NO_MATCHED_MESSAGE:
            log.warning("The miss op offset=%s in queue=%s is illegal, pullResult=%s", pull_offset_of_op,
                        op_queue_id, status.name)
            self.bridge.update_consume_offset(build_op_topic(), op_queue_id, next_begin)
            return status, next_begin, []
        for op in op_msgs:
            if op.body is None:
                done_op_offset.append(op.queue_offset)
                continue
            found: set[int] = set()
            if op.tags == REMOVE_TAG:
                for text in op.body.decode("utf-8").split(OFFSET_SEPARATOR):
                    if not text:
                        continue
                    offset = int(text)
                    if offset < mini_offset:
                        continue
                    remove_map[offset] = op.queue_offset
                    found.add(offset)
            else:
                log.error("Found a illegal tag in opMessageExt= %s ", op.msg_id)
            if found:
                op_msg_map[op.queue_offset] = found
            else:
                done_op_offset.append(op.queue_offset)
        return status, next_begin, op_msgs

    @staticmethod
    def _need_discard(msg_ext: MessageExt, transaction_check_max: int) -> bool:
        """``needDiscard``; counts this check in TRANSACTION_CHECK_TIMES when it is not."""
        check_times = msg_ext.properties.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES)
        check_time = 1
        if check_times is not None:
            check_time = int(check_times)
            if check_time >= transaction_check_max:
                return True
            check_time += 1
        msg_ext.properties[MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_time)
        return False

    def _need_skip(self, msg_ext: MessageExt) -> bool:
        """``needSkip``: older than fileReservedTime hours (its file may be gone)."""
        value_of_current_minus_born = self.broker.node.now_ms() - msg_ext.born_timestamp
        if value_of_current_minus_born > self.broker.message_store_config.fileReservedTime * 3600 * 1000:
            log.info("Half message exceed file reserved time ,so skip it.messageId %s,bornTime %s",
                     msg_ext.msg_id, msg_ext.born_timestamp)
            return True
        return False

    async def _put_back_half_msg_queue(self, msg_ext: MessageExt) -> bool:
        """``putBackHalfMsgQueue``: append the check copy; ``msg_ext`` then names the copy."""
        result = await self.bridge.put_message_return_result(self.bridge.renew_half_message_inner(msg_ext))
        if result is not None and result.put_message_status is PutMessageStatus.PUT_OK:
            append = result.append_message_result
            msg_ext.queue_offset = append.logics_offset
            msg_ext.commit_log_offset = append.wrote_offset
            msg_ext.msg_id = append.msg_id
            return True
        log.error("PutBackToHalfQueueReturnResult write failed, topic: %s, queueId: %s, msgId: %s",
                  msg_ext.topic, msg_ext.queue_id, msg_ext.msg_id)
        return False

    async def _check_prepare_queue_offset(self, remove_map: dict[int, int], done_op_offset: list[int],
                                          msg_ext: MessageExt) -> bool:
        """``checkPrepareQueueOffset``: an immunity copy, unless the original has ended."""
        prepare_queue_offset = msg_ext.properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepare_queue_offset is not None:
            offset = int(prepare_queue_offset)
            if offset == -1:
                return False
            if offset in remove_map:
                done_op_offset.append(remove_map.pop(offset))
                return True
        result = await self.bridge.put_message_return_result(self.bridge.renew_immunity_half_message_inner(msg_ext))
        return result is not None and result.put_message_status is PutMessageStatus.PUT_OK

    def _acting_master_slave(self) -> bool:
        broker = self.broker
        return (broker.broker_config.enableSlaveActingMaster
                and broker.min_broker_id_in_group == broker.broker_config.brokerId
                and broker.message_store_config.brokerRole == BrokerRole.SLAVE)

    async def check(self, transaction_timeout: int, transaction_check_max: int,
                    listener: AbstractTransactionalMessageCheckListener) -> None:
        """``check`` (see the module docstring)."""
        node = self.broker.node
        topic = build_half_topic()
        queue_ids = self.bridge.fetch_message_queues(topic)
        if not queue_ids:
            log.warning("The queue of topic is empty :%s", topic)
            return
        for queue_id in queue_ids:
            start_time = node.now_ms()
            half_offset = self.bridge.fetch_consume_offset(topic, queue_id)
            op_offset = self.bridge.fetch_consume_offset(build_op_topic(), queue_id)
            if half_offset < 0 or op_offset < 0:
                log.error("MessageQueue: %s illegal offset read: %s, op offset: %s,skip this queue", queue_id,
                          half_offset, op_offset)
                continue
            done_op_offset: list[int] = []
            remove_map: dict[int, int] = {}
            op_msg_map: dict[int, set[int]] = {}
            pull = self._fill_op_remove_map(remove_map, queue_id, op_offset, half_offset, op_msg_map, done_op_offset)
            get_message_null_count = 1
            new_offset = half_offset
            i = half_offset
            next_op_offset = pull[1]
            escape_fail_cnt = 0
            while True:
                if node.now_ms() - start_time > MAX_PROCESS_TIME_LIMIT:
                    log.info("Queue=%s process time reach max=%s", queue_id, MAX_PROCESS_TIME_LIMIT)
                    break
                if i in remove_map:
                    removed_op_offset = remove_map.pop(i)
                    op_set = op_msg_map.get(removed_op_offset)
                    if op_set is not None:
                        op_set.discard(i)
                        if not op_set:
                            del op_msg_map[removed_op_offset]
                            done_op_offset.append(removed_op_offset)
                else:
                    status, next_begin, msgs = self.bridge.get_half_message(queue_id, i, 1)
                    msg_ext = msgs[0] if msgs else None
                    if msg_ext is None:
                        get_message_null_count += 1
                        if get_message_null_count > MAX_RETRY_COUNT_WHEN_HALF_NULL + 1:
                            break
                        if status in _NO_NEW_MSG:
                            log.debug("No new msg, the miss offset=%s in=%s, continue check=%s", i, queue_id,
                                      get_message_null_count)
                            break
                        log.info("Illegal offset, the miss offset=%s in=%s, continue check=%s", i, queue_id,
                                 get_message_null_count)
                        i = next_begin
                        new_offset = i
                        continue
                    if self._acting_master_slave():
                        inner = self.bridge.renew_half_message_inner(msg_ext)
                        if await self.bridge.escape_message(inner):
                            listener.on_escaped(msg_ext)
                            escape_fail_cnt = 0
                            new_offset = i + 1
                            i += 1
                        else:
                            log.warning("Escaping transactional message failed %s times! msgId(offsetId)=%s, "
                                        "UNIQ_KEY(transactionId)=%s", escape_fail_cnt + 1, msg_ext.msg_id,
                                        msg_ext.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
                            await node.sleep(100 * (2 ^ escape_fail_cnt))  # Java's ^ is XOR (kept)
                            escape_fail_cnt += 1
                            if escape_fail_cnt == MAX_RETRY_TIMES_FOR_ESCAPE:
                                new_offset = i + 1
                                i += 1
                                escape_fail_cnt = 0
                        continue
                    if self._need_discard(msg_ext, transaction_check_max) or self._need_skip(msg_ext):
                        await listener.resolve_discard_msg(msg_ext)
                        new_offset = i + 1
                        i += 1
                        continue
                    if msg_ext.store_timestamp >= start_time:
                        log.debug("Fresh stored. the miss offset=%s, check it later, store=%s", i,
                                  msg_ext.store_timestamp)
                        break
                    value_of_current_minus_born = node.now_ms() - msg_ext.born_timestamp
                    check_immunity_time = transaction_timeout
                    check_immunity_time_str = msg_ext.properties.get(
                        MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
                    if check_immunity_time_str is not None:
                        check_immunity_time = get_immunity_time(check_immunity_time_str, transaction_timeout)
                        if value_of_current_minus_born < check_immunity_time:
                            if await self._check_prepare_queue_offset(remove_map, done_op_offset, msg_ext):
                                new_offset = i + 1
                                i += 1
                                continue
                    elif 0 <= value_of_current_minus_born < check_immunity_time:
                        log.debug("New arrived, the miss offset=%s, check it later checkImmunity=%s, born=%s", i,
                                  check_immunity_time, msg_ext.born_timestamp)
                        break
                    op_msgs = pull[2] if pull is not None else []
                    is_need_check = ((not op_msgs and value_of_current_minus_born > check_immunity_time)
                                     or (op_msgs and op_msgs[-1].born_timestamp - start_time > transaction_timeout)
                                     or value_of_current_minus_born <= -1)
                    if is_need_check:
                        if not await self._put_back_half_msg_queue(msg_ext):
                            continue
                        log.info("Check transaction. real_topic=%s,uniqKey=%s,offset=%s,commitLogOffset=%s",
                                 msg_ext.properties.get(MessageConst.PROPERTY_REAL_TOPIC),
                                 msg_ext.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                                 msg_ext.queue_offset, msg_ext.commit_log_offset)
                        await listener.resolve_half_msg(msg_ext, i)
                    else:
                        next_op_offset = pull[1] if pull is not None else next_op_offset
                        pull = self._fill_op_remove_map(remove_map, queue_id, next_op_offset, half_offset,
                                                        op_msg_map, done_op_offset)
                        if not pull[2]:
                            await node.sleep(SLEEP_WHILE_NO_OP)
                        else:
                            log.info("The miss message offset:%s, pullOffsetOfOp:%s, miniOffset:%s go on check", i,
                                     next_op_offset, half_offset)
                        continue
                new_offset = i + 1
                i += 1
            if new_offset != half_offset:
                self.bridge.update_consume_offset(topic, queue_id, new_offset)
            new_op_offset = self._calculate_op_offset(done_op_offset, op_offset)
            if new_op_offset != op_offset:
                self.bridge.update_consume_offset(build_op_topic(), queue_id, new_op_offset)

    @staticmethod
    def _calculate_op_offset(done_offset: list[int], old_offset: int) -> int:
        """``calculateOpOffset``: past the contiguous ended prefix."""
        new_offset = old_offset
        for offset in sorted(done_offset):
            if offset == new_offset:
                new_offset += 1
            else:
                break
        return new_offset
