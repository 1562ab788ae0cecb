"""DecisionPoints: the rules a simulated cluster lets a caller replace, one named field each.

RocketMQ makes the election rule pluggable (``controller/src/main/java/org/apache/rocketmq/
controller/elect/ElectPolicy.java``, a DefaultElectPolicy handed to the controller); rmqlab does
the same for the decisions its labs' exercises ask a student to write. Each field is a
strategy the component that decides calls at that point; None (the default) is RocketMQ's rule,
the component's own. The protocols live next to the components that call them:

  elect_master            controller.elect.impl.default_elect_policy.ElectMaster
                          (DefaultElectPolicy.tryElect, after the validity filter)
  transfer_ok             ha.group_transfer_service.TransferOk
                          (GroupTransferService.doWaitTransfer: may this put be answered)
  find_consistent_point   ha.autoswitch.auto_switch_ha_protocol.FindConsistentPoint
                          (AutoSwitchHAClient.doTruncate: EpochFileCache.findConsistentPoint)
  sync_state_set_shrink   ha.autoswitch.auto_switch_ha_protocol.ShrinkSyncStateSet
                          (AutoSwitchHAService.maybeShrinkSyncStateSet)
  sync_state_set_expand   ha.autoswitch.auto_switch_ha_protocol.ExpandSyncStateSet
                          (AutoSwitchHAService.maybeExpandInSyncStateSet)
  acting_master           namesrv.routeinfo.route_info_manager.ActingMaster
                          (RouteInfoManager.pickupTopicRouteData: which member a route lists
                          as the master of a group without one, under supportActingMaster)

    from rmqlab.common.decision_points import DecisionPoints
    Cluster("controller-standalone", decision_points=DecisionPoints(elect_master=my_rule))

Only the simulator takes them (a real process cannot be handed a Python callable). This module is
the lowest layer's: it names the points and imports no component.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Strategy = Callable[..., Any]


@dataclass(frozen=True)
class DecisionPoints:
    """One strategy per decision point (module docstring); None keeps RocketMQ's rule."""

    elect_master: Strategy | None = None
    transfer_ok: Strategy | None = None
    find_consistent_point: Strategy | None = None
    sync_state_set_shrink: Strategy | None = None
    sync_state_set_expand: Strategy | None = None
    acting_master: Strategy | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and not callable(value):
                raise TypeError(f"DecisionPoints.{f.name} must be callable or None, not {type(value).__name__}")

    def merged(self, other: DecisionPoints | None) -> DecisionPoints:
        """These points with `other`'s set ones on top; two strategies for one point is an error
        (two exercises cannot both decide it)."""
        if other is None:
            return self
        changes = {}
        for name in POINTS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is None:
                continue
            if mine is not None and mine is not theirs:
                raise ValueError(f"decision point {name!r} is set twice")
            changes[name] = theirs
        return dataclasses.replace(self, **changes)

    def replaced(self) -> tuple[str, ...]:
        """The points whose rule is not RocketMQ's."""
        return tuple(name for name in POINTS if getattr(self, name) is not None)


POINTS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(DecisionPoints))
ROCKETMQ = DecisionPoints()  # every point RocketMQ's rule


def of(points: DecisionPoints | None) -> DecisionPoints:
    """`points`, or RocketMQ's rules for None (what a component given no points uses)."""
    if points is None:
        return ROCKETMQ
    if not isinstance(points, DecisionPoints):
        raise TypeError(f"decision_points must be a DecisionPoints, not {type(points).__name__}")
    return points


__all__ = ["POINTS", "ROCKETMQ", "DecisionPoints", "Strategy", "of"]
