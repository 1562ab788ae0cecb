"""The demo's HTML report: one self-contained file that works offline — inline CSS and SVG, and the
labs' plotly figures (rmqlab.viz, drawn from the trace) with plotly.js inlined once."""

from __future__ import annotations

import html
import os

from rmqlab.demo.storage_walkthrough import ScenarioResult
from rmqlab.viz import FONT_FAMILY
from rmqlab.viz.timeaxis import share_time_range

# The font stack names a CJK font (FONT_FAMILY): the report quotes RocketMQ's Chinese docs.
_CSS = """
body{font-family:%s;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.lost{color:#b00;font-weight:bold}
.ok{color:#070;font-weight:bold}section{margin-bottom:2rem}code{background:#f3f3f3;padding:0 .2rem}
""" % FONT_FAMILY


def _offset_bar(r: ScenarioResult) -> str:
    """An SVG strip of the commitlog: flushed, written-but-unflushed, and where recovery cut."""
    width, total = 640, max(r.written_offset, 1)

    def x(offset: int) -> float:
        return round(width * offset / total, 1)

    parts = [f'<svg width="{width + 20}" height="58" role="img" aria-label="commitlog offsets">',
             f'<rect x="0" y="10" width="{x(r.flushed_offset)}" height="18" fill="#4a8"/>',
             f'<rect x="{x(r.flushed_offset)}" y="10" width="{x(r.written_offset) - x(r.flushed_offset)}" height="18" fill="#fc6"/>',
             f'<line x1="{x(r.recovered_offset)}" y1="4" x2="{x(r.recovered_offset)}" y2="34" stroke="#b00" stroke-width="2"/>',
             '<text x="0" y="48" font-size="11">green: flushed · yellow: written, in page cache only · red line: recovered end</text>',
             "</svg>"]
    return "".join(parts)


def _modes_section(modes, claims, figures_html: str = "") -> str:
    from rmqlab.demo.mode_comparison import OUTAGE_MS, SEND_EVERY_MS, claims_html, results_html

    return ("<section><h2>Deployment modes under a master machine crash</h2>"
            f"<p>Same workload in every mode (one send every {SEND_EVERY_MS} ms, open loop); broker-a's master "
            f"loses power and stays down {OUTAGE_MS // 1000} s, then returns. Latencies are virtual milliseconds "
            "in the simulator.</p>" + results_html(modes)
            + "<h3>The deployment guide's pros and cons, measured</h3>"
            + claims_html(claims) + figures_html + "</section>")


class _Figures:
    """Figures as HTML fragments; plotly.js is inlined with the first one of the document, so the
    file needs no network and carries the library once. Each figure's text uses the report's font
    stack (plotly draws SVG text with its own font setting, not the page's)."""

    def __init__(self) -> None:
        self.inlined = False

    def html(self, figures) -> str:
        parts = []
        for fig in figures:
            fig.update_layout(font_family=FONT_FAMILY)
            parts.append(fig.to_html(full_html=False, include_plotlyjs="inline" if not self.inlined else False,
                                     default_width="100%", default_height=f"{fig.layout.height or 420}px"))
            self.inlined = True
        return "".join(parts)


def _ms(value) -> str:
    return "—" if value is None else f"{value / 1000:.2f} s"


def failover_section(f, figures_html: str = "") -> str:
    """The headline: controller-mode failover after a master machine crash (demo.controller_failover)."""
    checks = "".join(f'<tr><td>{html.escape(name)}</td><td class="{"ok" if r.valid else "lost"}">'
                     f'{"valid" if r.valid else "INVALID"}</td><td style="text-align:left">'
                     f'{html.escape(str(r.stats if r.valid else r.first))}</td></tr>' for name, r in f.checks.items())
    return ("<section><h2>Controller mode: the master's machine crashes</h2>"
            "<p>Three standalone controllers (Raft on pysyncobj) and broker set broker-a of three replicas "
            "(allAckInSyncStateSet=true, RocketMQ's default timeouts). A producer sends every 50 ms; 5 s in, "
            f"the master's machine loses power; it returns 10 s later as a slave. Seed {f.seed}, simulated.</p>"
            "<table><tr><th>crashed master</th><th>new master</th><th>crash → elected</th>"
            "<th>crash → first acknowledged send</th><th>acknowledged</th><th>unknown outcome</th>"
            "<th>in flight at the end</th></tr>"
            f"<tr><td>{html.escape(f.crashed)}</td><td>{html.escape(f.new_master or 'none')}</td>"
            f"<td>{_ms(f.elected_after_ms)}</td><td>{_ms(f.first_ack_after_ms)}</td><td>{f.acknowledged}</td>"
            f"<td>{f.unknown}</td><td>{f.in_flight}</td></tr></table>"
            "<p>A machine crash is silent: no connection closes, so the controller waits out the broker's "
            "heartbeat timeout (controllerHeartBeatTimeoutMills, 10 s) before it elects from the SyncStateSet. "
            "A process crash (kill -9) closes the connections and is elected on at once "
            "(bench/bench_failover.py).</p>"
            "<table><tr><th>checker</th><th>verdict</th><th>details</th></tr>" + checks + "</table>"
            + figures_html + "</section>")


def write_report(results: list[ScenarioResult], path: str, modes=(), failover=None, failover_figures=(),
                 mode_figures=(), claims=()) -> str:
    rows = []
    for r in results:
        lost_cls = "lost" if r.acknowledged_lost else "ok"
        rows.append(
            f"<tr><td>{html.escape(r.title)}</td><td>{r.sent}</td><td>{r.acknowledged}</td>"
            f"<td>{r.flushed_offset}/{r.written_offset}</td><td>{r.recovery_mode}</td><td>{r.survivors}</td>"
            f'<td class="{lost_cls}">{r.acknowledged_lost}</td></tr>')
    sections = []
    for r in results:
        sections.append(
            f"<section><h2>{html.escape(r.title)}</h2>{_offset_bar(r)}<p>{html.escape(r.explanation)}</p>"
            f"<p>Commitlog files: {', '.join(f'<code>{f}</code>' for f in r.commitlog_files)}</p></section>")
    figures = _Figures()
    if failover is not None:
        # One run, one time axis: its figures, one above the other, span the same seconds.
        share_time_range(failover_figures, failover.run.events)
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>rmqlab demo</title><style>{_CSS}</style>"
           "</head><body><h1>rmqlab demo: what survives a crash?</h1>"
           "<p>A producer sends 1 KiB messages every 10 ms to a RocketMQ-format store; each run ends with a "
           "different crash, then the store restarts and recovers (RocketMQ's 「部署方式」 docs: async flush "
           "may lose a few messages on a machine crash, sync flush loses none).</p>"
           "<table><tr><th>run</th><th>sent</th><th>acknowledged</th><th>flushed/written bytes</th>"
           "<th>recovery</th><th>readable after restart</th><th>acknowledged lost</th></tr>"
           f"{''.join(rows)}</table>{''.join(sections)}"
           f"{failover_section(failover, figures.html(failover_figures)) if failover else ''}"
           f"{_modes_section(modes, claims, figures.html(mode_figures)) if modes else ''}</body></html>")
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
    return os.path.abspath(path)
