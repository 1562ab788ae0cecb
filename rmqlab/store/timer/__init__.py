"""RocketMQ 5 timer messages (RIP-43): TimerMessageStore and its checkpoint (``store/timer``)."""

from rmqlab.store.timer.timer_checkpoint import TimerCheckpoint
from rmqlab.store.timer.timer_message_store import TIMER_TOPIC, TimerMessageStore

__all__ = ["TIMER_TOPIC", "TimerCheckpoint", "TimerMessageStore"]
