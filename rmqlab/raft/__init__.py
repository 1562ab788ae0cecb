"""pysyncobj on both runtimes: the base of the RocketMQ 5 controller's Raft group.

  RaftComponent     a pysyncobj replica as a component: simulator (manual ticks on the node's
                    clock, SimTransport over the simulated network, seeded elections) or real
                    runtime (pysyncobj's TCP transport and autoTick thread)
  RaftSyncObj       the SyncObj subclass with seeded election timeouts
  SimTransport      the pysyncobj Transport over the simulator's byte streams
  FailReason, RaftError   how a replicated write fails
  clock             pysyncobj's monotonicTime bound to the node that runs it (patched on import)
  counter           the example state machine; counter_process runs one replica as an OS process
"""

from rmqlab.raft.component import RaftComponent
from rmqlab.raft.fail_reason import FailReason, RaftError
from rmqlab.raft.sim_transport import SimTransport
from rmqlab.raft.sync_obj import RaftSyncObj

__all__ = ["FailReason", "RaftComponent", "RaftError", "RaftSyncObj", "SimTransport"]
