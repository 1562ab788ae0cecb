"""CLEAN_BROKER_DATA (1011) request header (``header/controller/admin/CleanControllerBrokerDataRequestHeader.java``).

``mqadmin cleanBrokerMetadata -b "1;2" -bn broker-a -c cluster [-l]``
(``ReplicasInfoManager.cleanBrokerData``,
``tools/.../command/controller/CleanControllerBrokerMetaSubCommand.java``): forget some replicas of
a set (``brokerControllerIdsToClean``, ids joined by ";") or, with no ids, the whole set;
``isCleanLivingBroker`` skips the liveness checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (BOOLEAN, LONG, STRING, CommandCustomHeader,
                                                                   header_field)


@dataclass
class CleanControllerBrokerDataRequestHeader(CommandCustomHeader):
    cluster_name: str | None = header_field("clusterName", STRING)
    broker_name: str = header_field("brokerName", STRING, not_null=True)
    broker_controller_ids_to_clean: str | None = header_field("brokerControllerIdsToClean", STRING)
    # A primitive boolean named isCleanLivingBroker in Java: the extFields key is the field name.
    is_clean_living_broker: bool = header_field("isCleanLivingBroker", BOOLEAN, default=False)
    invoke_time: int | None = header_field("invokeTime", LONG)
