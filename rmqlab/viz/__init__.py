"""rmqlab.viz: the labs' figures and widgets (issue 7 §2). Every one of them reads only the event
trace (`Cluster.events()`, schema in datasets/README.md), never a component's internals, so the same
figure draws a live simulator run, a real cluster's merged trace or a recorded Parquet file.

Static figures are `plotly.graph_objects.Figure`s (deterministic for a seed: nbval compares them);
live ones are `FigureWidget`s redrawn in place after each action of a `controls.FaultPanel`.
"""

from __future__ import annotations

import contextlib
import logging

# The labs' quiet level: a crashed master makes every client log a warning per retry and every
# replica an error per failed election, which would bury a notebook's output. What a lab shows
# comes from the trace, which these levels do not touch.
LAB_LOG_LEVEL = logging.CRITICAL
# rmqlab's loggers, RocketMQ's POP logger name, and pysyncobj's.
LOGGERS = ("rmqlab", "RocketmqPop", "pysyncobj")


def notebook_setup(log_level: int = LAB_LOG_LEVEL) -> None:
    """Call once at the top of a lab notebook.

    - plotly renders as `plotly_mimetype` whatever the front end: the JSON figure nbval compares
      (platform-notes §5: VS Code or PLOTLY_RENDERER would otherwise pick an HTML renderer with
      random div ids);
    - rmqlab's and pysyncobj's loggers (LOGGERS) are quiet below `log_level`.
    """
    import plotly.io as pio

    pio.renderers.default = "plotly_mimetype"
    for name in LOGGERS:
        logging.getLogger(name).setLevel(log_level)


@contextlib.contextmanager
def quiet_logs(log_level: int = LAB_LOG_LEVEL):
    """notebook_setup's quiet loggers for the duration of a block (the demo), then as they were:
    a process that goes on (a test session) keeps its own levels."""
    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(log_level)
    try:
        yield
    finally:
        for logger, level in zip(loggers, saved):
            logger.setLevel(level)
