"""Delay-level messages: the delay-level table and delayOffset.json (RocketMQ broker/schedule)."""

from rmqlab.broker.schedule.schedule_message_service import ScheduleMessageService, parse_delay_level

__all__ = ["ScheduleMessageService", "parse_delay_level"]
