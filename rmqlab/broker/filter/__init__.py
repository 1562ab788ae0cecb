"""Message filtering on pull (RocketMQ ``broker/filter``)."""

from rmqlab.broker.filter.expression_message_filter import ExpressionMessageFilter

__all__ = ["ExpressionMessageFilter"]
