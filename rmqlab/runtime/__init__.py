"""One component model, two runtimes: the Node interface, the simulator, the real runtime."""

from rmqlab.runtime.component import Component
from rmqlab.runtime.nemesis import Nemesis
from rmqlab.runtime.node import Node

__all__ = ["Component", "Nemesis", "Node"]
