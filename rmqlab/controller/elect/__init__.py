"""Master election (``org.apache.rocketmq.controller.elect``)."""

from rmqlab.controller.elect.elect_policy import ElectPolicy
from rmqlab.controller.elect.impl.default_elect_policy import DefaultElectPolicy

__all__ = ["DefaultElectPolicy", "ElectPolicy"]
