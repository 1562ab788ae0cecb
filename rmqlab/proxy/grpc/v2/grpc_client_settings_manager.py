"""GrpcClientSettingsManager (proxy/grpc/v2/common/GrpcClientSettingsManager.java): the settings
each client sent on its Telemetry stream, merged with what the Proxy decides, keyed by client id.

What the Proxy adds (its Telemetry answer, as rocketmq-python-client 5.1.2 receives it):
* producers: the backoff policy (grpcClientProducerMaxAttempts and the exponential backoff),
  publishing.max_body_size = maxMessageSize (4 MiB) and validate_message_type;
* consumers: receive_batch_size, long_polling_timeout = grpcClientConsumerMaxLongPollingTimeout,
  fifo = the group's consumeMessageOrderly, max attempts = retryMaxTimes + 1 and the group's
  retry policy (RocketMQ's default: customized, the delay levels from 1 s on);
* everyone: metric.on = false (rmqlab has no metric collector).
"""

from __future__ import annotations

from rmqlab.common.delay_level import parse_delay_level
from rmqlab.config.proxy import ProxyConfig
from rmqlab.proto.v2 import definition_pb2 as pb

# SubscriptionGroupConfig's defaults, for a group whose config the broker cannot give.
DEFAULT_RETRY_MAX_TIMES = 16
# CustomizedRetryPolicy's default `next`: RocketMQ's delay levels 1s..2h (index 0 is 1 s).
DEFAULT_CUSTOMIZED_NEXT = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
RECEIVE_BATCH_SIZE = 32  # ProxyConfig.grpcClientConsumerLongPollingBatchSize


def _duration_ms(d, ms: int) -> None:
    d.FromMilliseconds(int(ms))


class GrpcClientSettingsManager:
    def __init__(self, config: ProxyConfig):
        self.config = config
        self._settings: dict[str, pb.Settings] = {}

    def update_client_settings(self, client_id: str, settings: pb.Settings) -> None:
        self._settings[client_id] = settings

    def get_raw_client_settings(self, client_id: str) -> pb.Settings | None:
        return self._settings.get(client_id)

    def remove_client_settings(self, client_id: str) -> pb.Settings | None:
        return self._settings.pop(client_id, None)

    def client_ids(self) -> list[str]:
        return list(self._settings)

    def merge(self, settings: pb.Settings, group_config=None) -> pb.Settings:
        """getClientSettings: the client's settings with the Proxy's decisions. `group_config` is
        the consumer group's SubscriptionGroupConfig (None: RocketMQ's defaults)."""
        merged = pb.Settings()
        merged.CopyFrom(settings)
        c = self.config
        if settings.HasField("publishing"):
            bp = merged.backoff_policy
            bp.max_attempts = c.grpcClientProducerMaxAttempts
            _duration_ms(bp.exponential_backoff.initial, c.grpcClientProducerBackoffInitialMillis)
            _duration_ms(bp.exponential_backoff.max, c.grpcClientProducerBackoffMaxMillis)
            bp.exponential_backoff.multiplier = float(c.grpcClientProducerBackoffMultiplier)
            merged.publishing.validate_message_type = True  # enableTopicMessageTypeCheck
            merged.publishing.max_body_size = c.maxMessageSize
        elif settings.HasField("subscription"):
            sub = merged.subscription
            sub.receive_batch_size = RECEIVE_BATCH_SIZE
            _duration_ms(sub.long_polling_timeout, c.grpcClientConsumerMaxLongPollingTimeoutMillis)
            sub.fifo = bool(group_config.consume_message_orderly) if group_config is not None else False
            retry_max = group_config.retry_max_times if group_config is not None else DEFAULT_RETRY_MAX_TIMES
            merged.backoff_policy.max_attempts = retry_max + 1
            merged.backoff_policy.customized_backoff.Clear()
            levels = parse_delay_level(DEFAULT_CUSTOMIZED_NEXT)
            for level in sorted(levels):
                merged.backoff_policy.customized_backoff.next.add().FromMilliseconds(levels[level])
        merged.metric.on = False
        return merged
