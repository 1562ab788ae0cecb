"""POP consumption records kept in the revive topic (RocketMQ ``store/.../store/pop``)."""

from rmqlab.store.pop.ack_msg import AckMsg
from rmqlab.store.pop.pop_check_point import PopCheckPoint

__all__ = ["AckMsg", "PopCheckPoint"]
