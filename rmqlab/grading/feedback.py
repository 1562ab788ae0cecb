"""Per-student HTML feedback: it names the violated property and
shows a minimized counterexample as a Lamport diagram, re-labelled so it does not reveal the hidden
workload.

The page names each property with its points, what it means and a hint for the violated ones, the
minimized counterexample (arguments, RocketMQ's answer, the student's), the findings, and a Lamport
diagram of the replay's trace around the first violation. The diagram is RE-LABELLED
(`relabel_events`): nodes become "replica A/B/C", "controller 1..", "name server 1", "client 1..",
addresses become those labels, times are relative to the slice's first event, raw frame bytes are
replaced by a digest, and string fields outside a short list of protocol words (frame names,
states, reasons with node names replaced) are dropped — topics, keys and bodies come from the
workload. The workload is shown as "hidden workload #k"; its name, description and file path never
appear (the tests check the HTML). plotly.js is written once in the feedback directory
(include_plotlyjs="directory").
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
from typing import Any

from rmqlab.grading.gradebook import PROPERTIES

_SAFE_STRING_FIELDS = {"name", "type", "code", "proto", "machine", "from", "to", "reason", "what", "role", "state",
                       "peer", "local", "addr", "flag"}
_ADDR = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b")


def _lane_label(node: str, counters: dict[str, int]) -> str:
    low = node.lower()
    for prefix, word in (("controller", "controller"), ("namesrv", "name server"), ("proxy", "proxy"),
                         ("client", "client"), ("producer", "client"), ("consumer", "client"),
                         ("nemesis", "nemesis")):
        if low.startswith(prefix):
            if word == "nemesis":
                return "nemesis"
            counters[word] = counters.get(word, 0) + 1
            return f"{word} {counters[word]}"
    counters["replica"] = counters.get("replica", 0) + 1
    n = counters["replica"] - 1
    return "replica " + (chr(ord("A") + n) if n < 26 else str(n + 1))


def node_labels(records: list[dict]) -> dict[str, str]:
    counters: dict[str, int] = {}
    labels: dict[str, str] = {}
    for r in sorted(records, key=lambda r: r["seq"]):
        if r["node"] not in labels:
            labels[r["node"]] = _lane_label(r["node"], counters)
    return labels


def _numeric(v: Any, depth: int = 0) -> bool:
    if v is None or isinstance(v, (bool, int, float)):
        return True
    if depth < 4 and isinstance(v, list):
        return all(_numeric(x, depth + 1) for x in v)
    if depth < 4 and isinstance(v, dict):
        return all(_numeric(x, depth + 1) for x in v.values()) and all(
            k in _SAFE_STRING_FIELDS or k.isidentifier() and len(k) < 32 for k in v)
    return False


class Relabeller:
    """Rewrites node names, addresses and hidden names in text (longest names first)."""

    def __init__(self, labels: dict[str, str], book: dict[str, str], hidden: list[str]):
        self.labels = labels
        self.addr = {a: labels.get(n, "peer") for a, n in book.items()}
        self.names = sorted(labels, key=len, reverse=True)
        self.hidden = [h for h in hidden if h]

    def text(self, s: str) -> str:
        for h in self.hidden:
            s = s.replace(h, "hidden workload")
        s = _ADDR.sub(lambda m: self.addr.get(m.group(0), "peer"), s)
        if self.names:
            s = re.sub("|".join(re.escape(n) for n in self.names), lambda m: self.labels[m.group(0)], s)
        return s

    def value(self, key: str, v: Any) -> Any:
        if isinstance(v, str):
            if key in ("peer", "local", "addr"):
                return self.addr.get(v, self.labels.get(v, "peer"))
            return self.text(v) if key in _SAFE_STRING_FIELDS else None
        if isinstance(v, (list, dict)):
            return v if _numeric(v) else None   # epoch entries, offsets: no names in them
        return v


def relabel_events(records: list[dict], hidden: list[str]):
    """Trace records (TraceEvent.to_record) → re-labelled TraceEvents (see module docstring)."""
    from rmqlab.trace.event import TraceEvent
    from rmqlab.viz.lamport import address_book
    events = [TraceEvent.from_record(r) for r in records]
    labels = node_labels(records)
    rl = Relabeller(labels, address_book(events), hidden)
    t0 = min((e.time_ms for e in events), default=0.0)
    out = []
    for e in events:
        fields = {}
        for k, v in e.fields.items():
            if k == "hex" and isinstance(v, str):
                fields[k] = hashlib.sha256(v.encode()).hexdigest()[:16]   # keeps send/recv matching
                continue
            nv = rl.value(k, v)
            if nv is not None:
                fields[k] = nv
        out.append(TraceEvent(e.seq, e.time_ms - t0, labels[e.node], e.kind, fields))
    return out, rl


# The frames that show an exercise's decision at work: the HA handshake/transfer for the truncation
# point and the sync-replication wait; every protocol (heartbeats, elections, SyncStateSet changes
# to the controller) for the others.
PROTOCOL = {"truncation_point": "ha", "transfer_ok": "ha"}


def lamport_html(records: list[dict], hidden: list[str], title: str, first_seq: int | None = None,
                 exercise: str | None = None) -> str:
    """The re-labelled diagram's HTML <div> (plotly.js loaded from the feedback directory): the last
    30 frames up to just after the first violation."""
    from rmqlab.viz.lamport import lamport_figure, match_frames
    events, _ = relabel_events(records, hidden)
    machines = {e.fields.get("machine") for e in events if e.kind == "state" and e.fields.get("machine")}
    upto = [e for e in events if first_seq is None or e.seq <= first_seq + 5]
    proto = PROTOCOL.get(exercise or "")
    if proto is not None and not match_frames(upto, proto):
        proto = None
    fig = lamport_figure(upto, proto=proto, machines=machines, last=30, title=title)
    return fig.to_html(full_html=False, include_plotlyjs="directory")


def ensure_plotlyjs(feedback_dir: str) -> None:
    from plotly.offline import get_plotlyjs
    path = os.path.join(feedback_dir, "plotly.min.js")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(get_plotlyjs())


_CSS = """body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
.fail{color:#b00020}.ok{color:#1b5e20}pre{background:#f6f6f6;padding:.5em;overflow-x:auto}
.finding{background:#fff3e0;padding:.4em .6em;border-left:4px solid #ef6c00;margin:.3em 0}"""


def _j(v: Any) -> str:
    return html.escape(json.dumps(v))


def student_page(student: str, exercises: list[dict], findings: list[dict], hidden: list[str]) -> str:
    """One student's page. `exercises`: [{exercise, rows: gradebook rows, failures: {property: [text]},
    counterexample: {args, expected, got} | None, diagram: html | None, diagram_title}]."""
    esc = html.escape
    rl = Relabeller({}, {}, hidden)
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Feedback: {esc(student)}</title>"
             f"<style>{_CSS}</style></head><body><h1>Grading feedback for {esc(student)}</h1>"]
    total = sum(r["points"] for ex in exercises for r in ex["rows"])
    top = sum(r["max_points"] for ex in exercises for r in ex["rows"])
    parts.append(f"<p>Total: <b>{total:.2f}</b> / {top:.2f} points.</p>")
    if findings:
        parts.append("<h2>Findings</h2>")
        for f in findings:
            parts.append(f"<div class='finding'><b>{esc(f['kind'])}</b> ({esc(f.get('notebook', ''))}): "
                         f"{esc(rl.text(str(f.get('detail', ''))))}</div>")
    for ex in exercises:
        parts.append(f"<h2>Exercise <code>{esc(ex['exercise'])}</code></h2><table><tr><th>property</th>"
                     "<th>points</th><th>passed</th><th>what it means</th></tr>")
        for r in ex["rows"]:
            p = PROPERTIES[r["property"]]
            ok = r["passed"] == r["total"]
            parts.append(f"<tr class='{'ok' if ok else 'fail'}'><td>{esc(r['property'])}</td>"
                         f"<td>{r['points']:.2f} / {r['max_points']:.2f}</td><td>{r['passed']} / {r['total']}</td>"
                         f"<td>{esc(p.meaning)}</td></tr>")
        parts.append("</table>")
        failed = [r for r in ex["rows"] if r["passed"] < r["total"]]
        for r in failed:
            p = PROPERTIES[r["property"]]
            parts.append(f"<h3 class='fail'>Violated: {esc(r['property'])}</h3><p>{esc(p.meaning)}</p>"
                         f"<p><i>Hint:</i> {esc(p.hint)}</p>")
            for text in ex.get("failures", {}).get(r["property"], [])[:3]:
                parts.append(f"<p>{esc(rl.text(text))}</p>")
        ce = ex.get("counterexample")
        if ce:
            parts.append("<h3>Smallest counterexample found</h3><table>"
                         f"<tr><th>arguments</th><td><pre>{_j(ce['args'])}</pre></td></tr>"
                         f"<tr><th>RocketMQ's rule answers</th><td><pre>{_j(ce['expected'])}</pre></td></tr>"
                         f"<tr><th>your function answers</th><td><pre>{_j(ce['got'])}</pre></td></tr></table>")
        if ex.get("diagram"):
            parts.append(f"<h3>{esc(ex.get('diagram_title', ''))}</h3>"
                         "<p>The frames between the nodes just before the first violation (nodes renamed, times "
                         "relative to the first frame shown).</p>" + ex["diagram"])
    parts.append("</body></html>")
    return "".join(parts)


def write_page(feedback_dir: str, student: str, page: str) -> str:
    os.makedirs(feedback_dir, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", student) or "student"
    path = os.path.join(feedback_dir, f"{safe}.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
