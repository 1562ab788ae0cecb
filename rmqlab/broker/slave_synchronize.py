"""SlaveSynchronize: a slave copies its master's metadata (``broker/.../slave/SlaveSynchronize.java``).

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/slave/SlaveSynchronize.java``. The
commitlog reaches a slave through HA replication; the ``config/`` files do not. So a slave
periodically asks its master (the address the name server returned at registration) for:

* the topic table (GET_ALL_TOPIC_CONFIG): when the DataVersion differs, the slave's table becomes
  the master's;
* the consumer offsets (GET_ALL_CONSUMER_OFFSET): merged into the slave's table (``putAll``, so an
  offset only the slave knows survives) with the master's DataVersion;
* the delay offsets (GET_ALL_DELAY_OFFSET): written as delayOffset.json and loaded;
* the subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG): like the topics.

Each part fails on its own (logged); the next round tries again. Every copied table is persisted,
so a slave that restarts, or serves reads while its master is down, has the master's metadata.

**Quirk** kept from RocketMQ (topics and groups): after adopting the master's DataVersion the slave
bumps its own version once per kept entry and once more, so the versions never match and every
round copies the whole table again. RocketMQ persists after every deleted entry; rmqlab persists
once, which leaves the same file.

Period: RocketMQ 5 checks every 3 s (first after 10 s) and syncs when 60 s have passed since the last
sync; rmqlab lets the broker configure those 60 s (``slave_synchronize_period_ms``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.remoting.exceptions import RemotingError

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")


class SlaveSynchronize:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.master_addr: str | None = None

    def set_master_addr(self, master_addr: str | None) -> None:
        if self.master_addr != master_addr:
            log.info("Update master address from %s to %s", self.master_addr, master_addr)
            self.master_addr = master_addr

    def _master(self) -> str | None:
        addr = self.master_addr
        if addr is not None and addr != self.broker.broker_addr:
            return addr
        return None

    async def sync_all(self) -> None:
        await self.sync_topic_config()
        await self.sync_consumer_offset()
        await self.sync_delay_offset()
        await self.sync_subscription_group_config()

    async def sync_topic_config(self) -> None:
        addr = self._master()
        if addr is None:
            return
        try:
            wrapper = await self.broker.broker_outer_api.get_all_topic_config(addr)
            tcm = self.broker.topic_config_manager
            if tcm.data_version != wrapper.data_version:
                tcm.data_version.assign_new_one(wrapper.data_version)
                new_table = wrapper.topic_config_table
                for name in list(tcm.topic_config_table):
                    del tcm.topic_config_table[name]
                    if name in new_table:
                        tcm.update_data_version()  # deleteTopicConfig of an entry that was still there
                for tc in new_table.values():
                    tcm.put_topic_config(tc)
                tcm.update_data_version()
                tcm.persist()
            log.info("Update slave topic config from master, %s", addr)
        except (RemotingError, ValueError, OSError) as e:
            log.error("SyncTopicConfig Exception, %s: %s", addr, e)

    async def sync_consumer_offset(self) -> None:
        addr = self._master()
        if addr is None:
            return
        try:
            wrapper = await self.broker.broker_outer_api.get_all_consumer_offset(addr)
            cof = self.broker.consumer_offset_manager
            cof.offset_table.update(wrapper.offset_table)
            cof.data_version.assign_new_one(wrapper.data_version)
            cof.persist()
            log.info("Update slave consumer offset from master, %s", addr)
        except (RemotingError, ValueError, OSError) as e:
            log.error("SyncConsumerOffset Exception, %s: %s", addr, e)

    async def sync_delay_offset(self) -> None:
        addr = self._master()
        if addr is None:
            return
        try:
            content = await self.broker.broker_outer_api.get_all_delay_offset(addr)
            if content is not None:
                # MixAll.string2File + loadWhenSyncDelayOffset: the master's file becomes the
                # slave's, then it is loaded (merged into the level table).
                sms = self.broker.schedule_message_service
                sms.decode(content)
                sms.persist()
            log.info("Update slave delay offset from master, %s", addr)
        except (RemotingError, ValueError, OSError) as e:
            log.error("SyncDelayOffset Exception, %s: %s", addr, e)

    async def sync_subscription_group_config(self) -> None:
        addr = self._master()
        if addr is None:
            return
        try:
            wrapper = await self.broker.broker_outer_api.get_all_subscription_group_config(addr)
            sgm = self.broker.subscription_group_manager
            if sgm.data_version != wrapper.data_version:
                sgm.data_version.assign_new_one(wrapper.data_version)
                new_table = wrapper.subscription_group_table
                for name in list(sgm.subscription_group_table):
                    del sgm.subscription_group_table[name]
                    sgm.forbidden_table.pop(name, None)
                    if name in new_table:
                        sgm.update_data_version()  # deleteSubscriptionGroupConfig of a kept entry
                for config in new_table.values():
                    sgm.put_subscription_group_config(config)
                sgm.update_data_version()
                sgm.persist()
                log.info("Update slave Subscription Group from master, %s", addr)
        except (RemotingError, ValueError, OSError) as e:
            log.error("SyncSubscriptionGroup Exception, %s: %s", addr, e)
