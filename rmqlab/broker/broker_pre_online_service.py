"""BrokerPreOnlineService: a broker of a slave-acting-master group comes back before it serves.

Mirrors ``broker/src/main/java/org/apache/rocketmq/broker/BrokerPreOnlineService.java`` (RIP-32,
"Slave Acting Master Mode", section "Pre-online mechanism",
https://github.com/apache/rocketmq/wiki/RIP-32-Slave-Acting-Master-Mode). A broker with
``enableSlaveActingMaster`` and ``totalReplicas > 1`` starts isolated (``BrokerController.is_isolated``:
no registration with the name servers, no heartbeats, no special services) unless ``skipPreOnline``;
this service then runs, one attempt every second, until one succeeds:

1. the group's members from a name server (``syncBrokerMemberGroup``; the isolated broker itself is
   not among them). ``minId`` is the smallest id other than its own (its own when it is alone);
2. nobody there: ``startService(ownId, ownAddr)``;
3. a master (id 0): for each member, ids ascending: EXCHANGE_BROKER_HA_INFO (906) with its HA
   address, ``brokerInitMaxOffset`` and address, so that the member replicates from it; wait until an
   HA connection from that member's host is in TRANSFER (``waitForHaHandshakeComplete``, below);
   then take the member's metadata back (``syncMetadataReverse``): its delay offsets
   (GET_ALL_DELAY_OFFSET), consumer offsets (GET_ALL_CONSUMER_OFFSET) and timer checkpoint
   (GET_TIMER_CHECK_POINT), each adopted when ``local.dataVersion.compare(remote) <= 0`` and then
   persisted. The member's metadata moved on while it acted as master (its consumers committed
   there), so this is what keeps the returning master from rolling offsets back. After the last
   member, ``startService(0, ownAddr)``: it registers and serves;
4. a slave whose group has a master (``minId == 0``): ask the master for its HA info (906 without
   an address), replicate from it, wait for its own HA client to reach TRANSFER, then
   ``startService(minId, addr)``; a master that answers no HA address: start at once;
5. otherwise (no master): ``startService(minId, addr)``.

A member already done is not asked again by the next attempt (``waitBrokerIndex`` survives
failures); an attempt fails (and the next one comes 1 s later) when a request fails, when no HA
connection shows up within 10 s, or when the awaited connection closes.

``waitForHaHandshakeComplete`` is RocketMQ's ``HAConnectionStateNotificationService``
(``store/.../ha/HAConnectionStateNotificationService.java``), checked every second: on a slave, its
HA client in TRANSFER completes it, READY for more than 10 s fails it; on a master, a connection
whose remote *host* is the member's host completes it in TRANSFER and fails it in SHUTDOWN; no such
connection for 10 s fails it. Quirk kept from RocketMQ: the match is by host only, so when several
members of the group run on one host (every broker of the simulator is 127.0.0.1), any of their
connections counts for each of them. Deviation: RocketMQ runs that check in the HA service's own
thread (and also when a connection is removed); rmqlab checks it from this service, every second
after the request, so a connection that closes between two checks is simply not found.

Hazard kept from RocketMQ: ``syncMetadataReverse`` asks every member for its timer checkpoint whether
or not timer messages are on; a member with ``timerWheelEnable=false`` has none and answers
SYSTEM_ERROR "The checkpoint is null", the attempt fails, and the returning master retries every
second without ever coming online (the acting-master labs and workloads keep the wheel on).

Deviation: an exception escaping an attempt makes RocketMQ retry at once; here it counts as a failed
attempt (retried 1 s later), so a persistent error cannot spin.

Each attempt is logged; its outcome is a ``state`` trace event of machine
``BrokerPreOnlineService`` (``PREPARING`` -> ``ONLINE``) once the broker serves.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.broker.schedule.deliver_delayed_message_timer_task import correct_delay_offset
from rmqlab.config.broker import MASTER_ID, BrokerRole
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.remoting.exceptions import RemotingError
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")

MACHINE = "BrokerPreOnlineService"
RETRY_INTERVAL_MS = 1_000                # waitForRunning(1000) after a failed attempt
CONNECTION_ESTABLISH_TIMEOUT_MS = 10_000  # HAConnectionStateNotificationService.CONNECTION_ESTABLISH_TIMEOUT
CHECK_INTERVAL_MS = 1_000                # the notification service's waitForRunning(1000)

# What a failed request raises here (the outer API's errors, a bad answer, a lost connection).
_REQUEST_ERRORS = (RemotingError, ValueError, OSError, TimeoutError)


def host_of(addr: str) -> str:
    """``RemotingHelper.parseHostFromAddress``: the part before the last ':'."""
    return addr.rsplit(":", 1)[0] if ":" in addr else addr


class BrokerPreOnlineService:
    """See the module docstring. ``start`` spawns the loop on the broker's node."""

    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.wait_broker_index = 0  # waitBrokerIndex: members done, kept across attempts
        self.stopped = False
        self.attempts = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = self.broker.node.spawn(self.run(), name=MACHINE)

    def shutdown(self) -> None:
        self.stopped = True
        if self._task is not None and not self._task.done() and self._task is not asyncio.current_task():
            self._task.cancel()

    async def run(self) -> None:
        broker = self.broker
        log.info("%s service started", MACHINE)
        while not self.stopped:
            if not broker.is_isolated:
                log.info("broker %s is online", broker.broker_config.brokerName)
                break
            self.attempts += 1
            try:
                success = await self.prepare_for_broker_online()
            except _REQUEST_ERRORS as e:
                log.error("Broker preOnline error, %s", e)
                success = False
            if success:
                break
            await broker.node.sleep(RETRY_INTERVAL_MS)
        log.info("%s service end", MACHINE)

    # -- one attempt ------------------------------------------------------------------------------
    async def prepare_for_broker_online(self) -> bool:
        broker, bc = self.broker, self.broker.broker_config
        try:
            group = await broker.broker_outer_api.sync_broker_member_group(
                bc.brokerClusterName, bc.brokerName, bc.compatibleWithOldNameSrv)
        except _REQUEST_ERRORS as e:
            log.error("syncBrokerMemberGroup from namesrv error, start service failed, will try later, %s", e)
            return False
        if group is not None and group.broker_addrs:
            min_broker_id = self.get_min_broker_id(group.broker_addrs)
            if bc.brokerId == MASTER_ID:
                return await self.prepare_for_master_online(group)
            if min_broker_id == MASTER_ID:
                return await self.prepare_for_slave_online(group)
            log.info("no master online, start service directly")
            await self._start_service(min_broker_id, group.broker_addrs.get(min_broker_id))
        else:
            log.info("no other broker online, will start service directly")
            await self._start_service(bc.brokerId, broker.broker_addr)
        return True

    async def prepare_for_master_online(self, group: BrokerMemberGroup) -> bool:
        broker = self.broker
        ids = sorted(group.broker_addrs)
        while True:
            if self.wait_broker_index >= len(ids):
                log.info("master preOnline complete, start service")
                await self._start_service(MASTER_ID, broker.broker_addr)
                return True
            addr = group.broker_addrs[ids[self.wait_broker_index]]
            try:
                await broker.broker_outer_api.send_broker_ha_info(addr, broker.ha_server_addr,
                                                                  broker.broker_init_max_offset, broker.broker_addr)
            except _REQUEST_ERRORS as e:
                log.error("send ha address to %s exception, %s", addr, e)
                return False
            if not await self.wait_for_ha_handshake_complete(addr):
                log.error("wait for handshake completion failed, HA connection lost")
                return False
            if not await self.sync_metadata_reverse(addr):
                return False
            self.wait_broker_index += 1

    async def sync_metadata_reverse(self, addr: str) -> bool:
        """``syncMetadataReverse``: the member's delay offsets, consumer offsets and timer
        checkpoint, each adopted when its data version is not older than the local one."""
        broker = self.broker
        api, sms = broker.broker_outer_api, broker.schedule_message_service
        log.info("Get metadata reverse from %s", addr)
        try:
            delay_offset = await api.get_all_delay_offset(addr)
            delay_version = sms.decode_data_version(delay_offset) if delay_offset is not None else None
            consumer_offset = await api.get_all_consumer_offset(addr)
            timer_checkpoint = await api.get_timer_check_point(addr)
        except _REQUEST_ERRORS as e:
            log.error("GetMetadataReverse Failed, %s", e)
            return False
        cof = broker.consumer_offset_manager
        if consumer_offset is not None and cof.data_version.compare(consumer_offset.data_version) <= 0:
            log.info("%s's consumerOffset data version is larger than master broker, %s's consumerOffset will "
                     "be used.", addr, addr)
            cof.offset_table.update(consumer_offset.offset_table)  # putAll: offsets only this broker has stay
            cof.data_version.assign_new_one(consumer_offset.data_version)
            cof.persist()
        if delay_offset is not None:
            # Deviation: a member's file without a data version is not adopted; RocketMQ's compare
            # fails on the null (NullPointerException), and so would every attempt after it.
            if delay_version is not None and sms.data_version.compare(delay_version) <= 0:
                log.info("%s's scheduleMessageService data version is larger than master broker, %s's delayOffset "
                         "will be used.", addr, addr)
                # MixAll.string2File + load(): the member's file becomes this broker's, merged into
                # the level table, its version adopted, the offsets kept within their queues.
                sms.decode(delay_offset)
                sms.persist()
                correct_delay_offset(broker)
        tms = broker.timer_message_store
        if tms is not None and tms.timer_checkpoint.data_version.compare(timer_checkpoint.data_version) <= 0:
            log.info("%s's timerCheckpoint data version is larger than master broker, %s's timerCheckpoint will "
                     "be used.", addr, addr)
            ckpt = tms.timer_checkpoint
            ckpt.last_read_time_ms = timer_checkpoint.last_read_time_ms
            ckpt.master_timer_queue_offset = timer_checkpoint.master_timer_queue_offset
            ckpt.data_version.assign_new_one(timer_checkpoint.data_version)
            ckpt.flush()
            tms.sync_last_read_time_ms()  # (RocketMQ's idle dequeue loop re-reads it by itself)
        return True

    async def prepare_for_slave_online(self, group: BrokerMemberGroup) -> bool:
        broker = self.broker
        try:
            info = await broker.broker_outer_api.retrieve_broker_ha_info(group.broker_addrs[MASTER_ID])
        except _REQUEST_ERRORS as e:
            log.error("retrieve master ha info exception, %s", e)
            return False
        checkpoint = broker.message_store.store_checkpoint
        if checkpoint.master_flushed_offset == 0 and broker.message_store_config.syncMasterFlushOffsetWhenStartup \
                and info.master_flush_offset is not None:
            log.info("Set master flush offset in slave to %s", info.master_flush_offset)
            checkpoint.master_flushed_offset = info.master_flush_offset
        min_broker_id = self.get_min_broker_id(group.broker_addrs)
        if info.master_ha_address is None:
            log.info("fetch master ha address return null, start service directly")
            await self._start_service(min_broker_id, group.broker_addrs.get(min_broker_id))
            return True
        # (RocketMQ also records the master's address in the store; rmqlab's HA client needs only
        # the HA one.) As in RocketMQ, no wakeup: the client connects at its next try (<= 5 s).
        broker.ha_service.update_ha_master_address(info.master_ha_address)
        if not await self.wait_for_ha_handshake_complete(info.master_ha_address):
            log.error("wait for handshake completion failed, HA connection lost")
            return False
        log.info("slave preOnline complete, start service")
        await self._start_service(min_broker_id, group.broker_addrs.get(min_broker_id))
        return True

    # -- helpers ----------------------------------------------------------------------------------
    async def wait_for_ha_handshake_complete(self, addr: str) -> bool:
        """``waitForHaHandshakeComplete`` (module docstring): True once the HA connection with
        ``addr``'s host is in TRANSFER, False when it cannot be."""
        broker = self.broker
        node, ha = broker.node, broker.ha_service
        host = host_of(addr)
        log.info("wait for handshake completion with %s", addr)
        last_check = node.now_ms()
        while not self.stopped:
            await node.sleep(CHECK_INTERVAL_MS)
            now = node.now_ms()
            if broker.message_store_config.brokerRole == BrokerRole.SLAVE:
                state = ha.ha_client.current_state if ha.ha_client is not None else HAConnectionState.READY
                if state is HAConnectionState.TRANSFER:
                    return True
                if state is HAConnectionState.READY:
                    if now - last_check > CONNECTION_ESTABLISH_TIMEOUT_MS:
                        log.error("Wait HA connection establish with %s timeout", host)
                        return False
                else:
                    last_check = now
                continue
            found = False
            for conn in list(ha.connection_list):
                if host_of(conn.client_address) != host:
                    continue
                found = True
                if conn.current_state is HAConnectionState.TRANSFER:
                    return True
                if conn.current_state is HAConnectionState.SHUTDOWN:
                    return False
            if found:
                last_check = now
            elif now - last_check > CONNECTION_ESTABLISH_TIMEOUT_MS:
                log.error("Wait HA connection establish with %s timeout", host)
                return False
        return False

    def get_min_broker_id(self, broker_addrs: dict[int, str]) -> int:
        """``getMinBrokerId``: the smallest id other than this broker's, else its own."""
        others = [broker_id for broker_id in broker_addrs if broker_id != self.broker.broker_config.brokerId]
        return min(others) if others else self.broker.broker_config.brokerId

    async def _start_service(self, min_broker_id: int, min_broker_addr: str | None) -> None:
        broker = self.broker
        await broker.start_service(min_broker_id, min_broker_addr)
        bc, node = broker.broker_config, broker.node
        # The log line people read, then the typed event readers use (as BrokerController's states).
        node.trace("log", level="INFO", logger="rmqlab.broker",
                   message=f"{bc.brokerName} pre-online done after {self.attempts} attempt(s), "
                           f"min broker id is {min_broker_id}")
        node.trace("state", machine=MACHINE, from_="PREPARING", to="ONLINE", broker_set=bc.brokerName,
                   broker_id=bc.brokerId, min_broker_id=min_broker_id, min_broker_addr=min_broker_addr,
                   attempts=self.attempts)
