"""A put under controller mode's write-ack rule (reference §2.10).

CommitLog.async_put_message applies the classic rule (wait for inSyncReplicas replicas). In
controller mode CommitLog.asyncPutMessage differs for a SYNC_MASTER message with waitStoreMsgOK:

1. fewer in-sync replicas than minInSyncReplicas: refused before anything is written
   (IN_SYNC_REPLICAS_NOT_ENOUGH);
2. otherwise it waits for inSyncReplicas replicas, or for every SyncStateSet member when
   allAckInSyncStateSet (ackNums -1, which the AutoSwitch GroupTransferService understands).

This function is that branch for a store whose HA service is an AutoSwitchHAService. It lives in
its own file because the store's files are owned elsewhere; folding it into CommitLog (a
controller-mode flag choosing the rule) is the intended end state — see the HA report.
"""

from __future__ import annotations

from rmqlab.common.future import CompletableFuture
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.ha.autoswitch.auto_switch_ha_protocol import decide_write_ack
from rmqlab.store.put_message_result import AppendMessageStatus, PutMessageResult, PutMessageStatus


def async_put_message(store, msg: MessageExtBrokerInner) -> CompletableFuture[PutMessageResult]:
    """DefaultMessageStore.asyncPutMessage with CommitLog's controller-mode acknowledgement rule."""
    if not store.running:
        raise RuntimeError(f"{store.root}: store is not running (load() it first)")
    cfg, commit_log, ha = store.config, store.commit_log, store.ha_service
    if getattr(cfg.brokerRole, "name", cfg.brokerRole) == "SLAVE":
        return CompletableFuture.completed(PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE))
    need_handle_ha = commit_log._need_handle_ha(msg)
    decision = None
    if need_handle_ha:
        if ha is None:
            raise RuntimeError("controller mode needs an AutoSwitchHAService attached to the store")
        decision = decide_write_ack(ha.in_sync_replicas_nums(commit_log.get_max_offset()), cfg.minInSyncReplicas,
                                    cfg.inSyncReplicas, cfg.allAckInSyncStateSet)
        if decision.refuse is not None:
            return CompletableFuture.completed(PutMessageResult(decision.refuse))
    # From here on as CommitLog.async_put_message.
    msg.store_timestamp = commit_log.clock()
    msg.store_host = commit_log.store_host
    key = f"{msg.topic}-{msg.queue_id}"
    queue_offset = commit_log.topic_queue_table.get(key, 0)
    result = commit_log._append(msg, queue_offset)
    if result.status is not AppendMessageStatus.PUT_OK:
        status = {AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
                  AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                  }.get(result.status, PutMessageStatus.UNKNOWN_ERROR)
        return CompletableFuture.completed(PutMessageResult(status, result))
    commit_log.topic_queue_table[key] = queue_offset + 1
    if not need_handle_ha and not commit_log.sync_flush:
        return CompletableFuture.completed(PutMessageResult(PutMessageStatus.PUT_OK, result))
    need_ack_nums = decision.need_ack_nums if need_handle_ha else 1
    return commit_log._handle_disk_flush_and_ha(result, msg, need_ack_nums, need_handle_ha)
