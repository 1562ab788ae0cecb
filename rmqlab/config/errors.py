"""Errors and warnings raised while loading a RocketMQ-style configuration.

RocketMQ's MixAll.properties2Object swallows every problem (an unknown key is ignored, a value
that fails Integer.parseInt is skipped, "ture" parses as false). rmqlab reports them instead:
a mistyped key is a ConfigWarning naming file, line and the closest known key; a malformed
value or an impossible combination is a ConfigError naming file:line:key and what was expected.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration that cannot be used: a malformed value, a missing file, a bad combination.

    The message is complete and meant for a person (``conf/x.properties:5: brokerRole = 'MASTER':
    expected one of ASYNC_MASTER, SYNC_MASTER, SLAVE``); the CLI prints it without a traceback."""


class ConfigWarning(UserWarning):
    """A configuration entry rmqlab ignores or corrects (unknown key, setting rmqlab does not
    implement, master brokerId forced to 0). Emitted through :mod:`warnings` and also collected
    in the loaded bundle's ``warnings`` list."""
