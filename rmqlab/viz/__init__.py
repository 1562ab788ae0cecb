"""rmqlab.viz: the labs' figures and widgets. Every one of them reads only the event
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
# The labs and the demo report quote the Chinese design documents. A font stack that names a CJK
# font: Chromium on Debian shows a box per character for a CJK text whose fonts have no such glyph
# (Debian's fonts-noto-cjk package provides "Noto Sans CJK SC").
FONT_FAMILY = ('system-ui, "Noto Sans", "DejaVu Sans", Arial, "Noto Sans CJK SC", "Source Han Sans SC", '
               '"PingFang SC", "Microsoft YaHei", sans-serif')
PLOTLY_TEMPLATE = "plotly+rmqlab"


def notebook_setup(log_level: int = LAB_LOG_LEVEL) -> None:
    """Call once at the top of a lab notebook.

    - plotly renders as `plotly_mimetype` whatever the front end: the JSON figure nbval compares
      (VS Code or PLOTLY_RENDERER would otherwise pick an HTML renderer with random div ids);
    - figures use plotly's default template plus FONT_FAMILY (`PLOTLY_TEMPLATE`), so a Chinese
      quotation in a title or label renders;
    - rmqlab's and pysyncobj's loggers (LOGGERS) are quiet below `log_level`.
    """
    import plotly.io as pio

    pio.renderers.default = "plotly_mimetype"
    register_template()
    pio.templates.default = PLOTLY_TEMPLATE
    for name in LOGGERS:
        logging.getLogger(name).setLevel(log_level)


def register_template() -> None:
    """Register plotly template "rmqlab": FONT_FAMILY for every text of a figure."""
    import plotly.graph_objects as go
    import plotly.io as pio

    pio.templates["rmqlab"] = go.layout.Template(layout={"font": {"family": FONT_FAMILY}})


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
