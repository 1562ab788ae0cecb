"""HAConnectionState: the states of an HA connection, on either end.

Mirrors org.apache.rocketmq.store.ha.HAConnectionState; the wire value of a state (controller
mode's handshake carries it) is its ordinal. The classic protocol uses three of them: the slave's
DefaultHAClient is READY (no connection) or TRANSFER, the master's DefaultHAConnection is TRANSFER
from accept until SHUTDOWN. HANDSHAKE and SUSPEND belong to controller mode (AutoSwitch).
"""

from __future__ import annotations

import enum


class HAConnectionState(enum.Enum):
    READY = 0      # ready to (re)connect
    HANDSHAKE = 1  # commitlog consistency check (controller mode only)
    TRANSFER = 2   # replicating
    SUSPEND = 3    # transfer paused (controller mode only)
    SHUTDOWN = 4   # the connection is over
