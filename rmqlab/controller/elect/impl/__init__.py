"""Election policy implementations (``org.apache.rocketmq.controller.elect.impl``)."""

from rmqlab.controller.elect.impl.default_elect_policy import DefaultElectPolicy

__all__ = ["DefaultElectPolicy"]
