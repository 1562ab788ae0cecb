"""The demo's HTML report: one self-contained file (inline CSS and SVG, no scripts, works offline)."""

from __future__ import annotations

import html
import os

from rmqlab.demo.storage_walkthrough import ScenarioResult

_CSS = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.lost{color:#b00;font-weight:bold}
.ok{color:#070;font-weight:bold}section{margin-bottom:2rem}code{background:#f3f3f3;padding:0 .2rem}
"""


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


def _modes_section(modes) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(m.mode)}</td><td>{m.acknowledged}</td><td>{m.indeterminate}</td>"
        f"<td>{m.acked_during_outage}/{m.sends_during_outage}</td><td>{m.readable_during_outage}/{m.on_broker_a}</td>"
        f'<td class="{"lost" if m.acknowledged_lost else "ok"}">{m.acknowledged_lost}</td>'
        f"<td>{m.missing_after_recovery}</td><td>{m.p50_ms:.2f}</td><td>{m.p99_ms:.2f}</td>"
        f"<td style='text-align:left'>{html.escape(m.seed_says)}</td></tr>" for m in modes)
    return ("<section><h2>Deployment modes under a master machine crash</h2>"
            "<p>Same workload in every mode (one send every 20 ms); broker-a's machine loses power 4 s in and "
            "returns later. Latencies are virtual milliseconds in the simulator.</p>"
            "<table><tr><th>mode</th><th>acked</th><th>unknown outcome</th><th>acked during outage</th>"
            "<th>read during outage</th><th>lost</th><th>missing after recovery</th><th>p50 ms</th><th>p99 ms</th>"
            f"<th>seed 000 says</th></tr>{rows}</table></section>")


def write_report(results: list[ScenarioResult], path: str, modes=()) -> str:
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
    doc = (f"<!doctype html><html><head><meta charset='utf-8'><title>rmqlab demo</title><style>{_CSS}</style>"
           "</head><body><h1>rmqlab demo: what survives a crash?</h1>"
           "<p>A producer sends 1 KiB messages every 10 ms to a RocketMQ-format store; each run ends with a "
           "different crash, then the store restarts and recovers (seed 000: async flush may lose a few "
           "messages on a machine crash, sync flush loses none).</p>"
           "<table><tr><th>run</th><th>sent</th><th>acknowledged</th><th>flushed/written bytes</th>"
           "<th>recovery</th><th>readable after restart</th><th>acknowledged lost</th></tr>"
           f"{''.join(rows)}</table>{''.join(sections)}{_modes_section(modes) if modes else ''}</body></html>")
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
    return os.path.abspath(path)
