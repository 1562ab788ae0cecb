"""The simulated runtime: one process, a virtual clock, an in-memory network, seeded."""

from rmqlab.runtime.sim.loop import SimLoop, SimulationDeadlock, SimulationUnsupported
from rmqlab.runtime.sim.network import SimNetwork
from rmqlab.runtime.sim.node import SimNode
from rmqlab.runtime.sim.simulation import Simulation, SimNemesis

__all__ = ["SimLoop", "SimulationDeadlock", "SimulationUnsupported", "SimNetwork", "SimNode", "Simulation", "SimNemesis"]
