"""Cutting a running store back to an offset: what controller-mode HA needs.

Mirrors DefaultMessageStore.truncateFiles / isOffsetAligned / truncateDirtyFiles and
AutoSwitchHAService.truncateInvalidMsg, as functions on a loaded DefaultMessageStore rather than
methods of those classes, so all the cutting controller-mode HA does is in one module.

A cut keeps the commitlog and every consume queue consistent: units pointing at or beyond the cut
go first, then the commitlog is cut (whole files beyond it destroyed, the cut bytes zeroed, see
MappedFile.truncate_to), the next queue offsets are recomputed from the queues, and the dispatcher
resumes at min(where it was, the cut).
"""

from __future__ import annotations

import logging

log = logging.getLogger("rmqlab.store")


def is_offset_aligned(store, offset: int) -> bool:
    """isOffsetAligned: a record (a message or a BLANK file tail) starts at `offset`, or nothing is there."""
    req = store.commit_log.check_message_at(offset, check_crc=True)
    return req is None or req.success


def recover_topic_queue_table(store) -> None:
    """recoverTopicQueueTable: each queue's next offset is the number of units it holds."""
    store.commit_log.topic_queue_table = {
        f"{cq.topic}-{cq.queue_id}": cq.get_max_offset_in_queue() for cq in store.consume_queues()}


def truncate_dirty_files(store, offset: int) -> None:
    """truncateDirtyFiles: cut the commitlog and the consume queues at `offset` (no-op at or past the end)."""
    commit_log = store.commit_log
    if offset >= commit_log.get_max_offset():
        return
    reput = store.reput_message_service
    old_reput_from = reput.reput_from_offset
    for cq in store.consume_queues():
        cq.truncate_dirty_logic_files(offset)
    commit_log.mapped_file_queue.truncate_dirty_files(offset)
    commit_log.forget_files_after(offset)
    recover_topic_queue_table(store)
    reput.reput_from_offset = min(old_reput_from, offset)
    log.info("%s: truncated the commitlog and consume queues to %d", store.root, offset)


def truncate_files(store, offset: int) -> bool:
    """truncateFiles: cut at `offset` if a record starts there; False (nothing cut) if not."""
    if offset >= store.get_max_phy_offset():
        return True
    if not is_offset_aligned(store, offset):
        log.error("%s: cannot truncate to %d: no message starts there", store.root, offset)
        return False
    truncate_dirty_files(store, offset)
    return True


def truncate_invalid_msg(store) -> int:
    """AutoSwitchHAService.truncateInvalidMsg: cut a torn tail past the dispatcher.

    Walks from the dispatcher's position over whole records (no CRC check), a BLANK jumping to the
    next file, and cuts where the walk stops. Returns that offset, or -1 when the dispatcher is not
    behind (nothing to examine). Complete but unconfirmed messages stay: the handshake decides those.
    """
    if store.dispatch_behind_bytes() <= 0:
        return -1
    commit_log = store.commit_log
    offset = store.reput_message_service.reput_from_offset
    max_offset = commit_log.get_max_offset()
    while offset < max_offset:
        req = commit_log.check_message_at(offset, check_crc=False)
        if req is None or not req.success:
            break
        offset = offset + req.msg_size if req.msg_size > 0 else commit_log.roll_next_file(offset)
    log.info("%s: truncate invalid messages: commitlog to %d", store.root, offset)
    truncate_dirty_files(store, offset)
    return offset
