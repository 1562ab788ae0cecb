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

Every student-visible text goes through one function, `OutputFilter.clean` (the page, the re-labelled
diagram's strings, and — through rmqlab.grading.gradebook.write_all — the CSV and Parquet files):
whatever a student printed, raised or returned is hostile text. It
- removes the whole field when it holds a run of MIN_RUN bytes or more copied from a hidden file
  (raw, as a bytes repr with \\x escapes, as hex or as base64);
- replaces the hidden workloads' names, descriptions, file names, stems and paths (the hidden
  directory's, listed afresh) with "hidden workload", ignoring case;
- replaces absolute paths of the grader's machine with "<path>" (a path inside the student's own
  scratch directory keeps its part below it, as "<scratch>/...");
- caps each field at FIELD_CAP characters and a page's student text at PAGE_CAP, marking the cut
  with TRUNCATED.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import hashlib
import html
import json
import os
import re
from collections.abc import Iterable
from typing import Any

from rmqlab.grading.gradebook import POLICY, PROPERTIES

FIELD_CAP = 2000        # characters of one student-visible field (a finding, a failure line, an answer)
PAGE_CAP = 50_000       # characters of filtered text on one page (every field together)
TRUNCATED = "[truncated]"
MIN_RUN = 32            # a run of this many bytes copied from a hidden file is removed
# Bytes of hidden files indexed for MIN_RUN: about 100 bytes of index per _BLOCK bytes, so 32 MiB costs
# about 200 MB; a hidden set of workloads is a few MB (the 42 public ones: 3.2 MB).
HIDDEN_READ_CAP = 32 * 1024 * 1024
_BLOCK = MIN_RUN // 2   # indexed at multiples of _BLOCK: any MIN_RUN-byte run holds one whole block
_PATH = re.compile(r"(?<![\w.:/~\\<>-])/(?:[\w.@+~%=,-]+/?)+")
_HEX = re.compile(r"[0-9a-fA-F]{%d,}" % (2 * MIN_RUN))
_B64 = re.compile(r"[A-Za-z0-9+/_-]{%d,}={0,2}" % (MIN_RUN * 4 // 3))
REMOVED = "[removed: it held bytes of a hidden file]"


class OutputFilter:
    """The filter every student-visible text goes through (module docstring). `hidden`: names,
    descriptions and paths to hide; a path among them that is a directory or a file contributes its
    files' names, stems, paths and bytes. `scratch`: the student's own scratch directories (paths
    below them are shown relative to them). `page_cap`: the budget of one page (`for_page` starts a
    fresh one)."""

    def __init__(self, hidden: Iterable[str] = (), scratch: Iterable[str] = (), *, field_cap: int = FIELD_CAP,
                 page_cap: int | None = PAGE_CAP):
        names: set[str] = set()
        files: list[str] = []
        for h in hidden:
            if not h:
                continue
            names.add(h)
            if os.path.isabs(h) or os.sep in h:
                names.add(os.path.basename(h.rstrip(os.sep)))
                if os.path.isdir(h):
                    names.add(os.path.realpath(h))
                    for root, dirs, fs in os.walk(h):
                        dirs.sort()
                        for f in sorted(fs):
                            files.append(os.path.join(root, f))
                        names.update(dirs)
                elif os.path.isfile(h):
                    files.append(h)
        for f in files:
            names.update((f, os.path.realpath(f), os.path.basename(f), os.path.splitext(os.path.basename(f))[0]))
        for n in list(names):
            if os.path.isabs(n):
                names.add(os.path.realpath(n))
        self.names = sorted((n for n in names if n.strip()), key=len, reverse=True)
        # Long names anywhere (also inside a longer word); short ones only as a word of their own.
        parts = [re.escape(n) if len(n) >= 6 else r"(?<![A-Za-z0-9])" + re.escape(n) + r"(?![A-Za-z0-9])"
                 for n in self.names]
        self._names_re = re.compile("|".join(parts), re.IGNORECASE) if parts else None
        self.scratch = sorted({os.path.realpath(d) for d in scratch if d} | {d.rstrip("/") for d in scratch if d},
                              key=len, reverse=True)
        self.field_cap = field_cap
        self.page_cap = page_cap
        self._left = page_cap
        self._blocks: dict[bytes, list[tuple[int, int]]] = {}
        self._data: list[bytes] = []
        read = 0
        for f in dict.fromkeys(os.path.realpath(f) for f in files):
            try:
                with open(f, "rb") as fh:
                    data = fh.read(max(0, HIDDEN_READ_CAP - read))
            except OSError:
                continue
            read += len(data)
            i = len(self._data)
            self._data.append(data)
            for o in range(0, len(data) - _BLOCK + 1, _BLOCK):
                block = data[o:o + _BLOCK]
                if block.count(block[:1]) == _BLOCK:
                    continue   # one byte repeated (zero padding, spaces): says nothing about the file
                at = self._blocks.setdefault(block, [])
                if len(at) < 8:
                    at.append((i, o))

    def for_page(self, budget: bool = True) -> OutputFilter:
        """The same filter with a fresh page budget (none with `budget=False`: a diagram's labels)."""
        other = object.__new__(OutputFilter)
        other.__dict__.update(self.__dict__)
        other._left = self.page_cap if budget else None
        return other

    # -- the one function ------------------------------------------------------------------------
    def clean(self, value: Any, cap: int | None = None) -> str:
        """`value` as student-visible text (module docstring)."""
        cap = self.field_cap if cap is None else cap
        text = value if isinstance(value, str) else str(value)
        # Bound the work first: what lies beyond a few caps would be cut below anyway.
        cut = len(text) > 4 * cap
        text = text[:4 * cap]
        if self._blocks and self.holds_hidden_bytes(text):
            text = REMOVED
        if self._names_re is not None:
            text = self._names_re.sub("hidden workload", text)
        text = _PATH.sub(self._path, text)
        if cut or len(text) > cap:
            text = text[:cap] + " " + TRUNCATED
        if self._left is not None:
            if self._left <= 0:
                return TRUNCATED
            if len(text) > self._left:
                text = text[:self._left] + " " + TRUNCATED
            self._left -= len(text)
        return text

    def clean_json(self, json_text: str, cap: int | None = None) -> str:
        """A JSON field (a counterexample's arguments or answers): filtered like `clean`; when that
        changes it, the result is a JSON string of the filtered text, so readers can still parse it."""
        out = self.clean(json_text, cap)
        return json_text if out == json_text else json.dumps(out)

    def _path(self, m: re.Match) -> str:
        p = m.group(0)
        for d in self.scratch:
            if p == d or p.startswith(d + "/"):
                return "<scratch>" + p[len(d):]
        return "<path>"

    def holds_hidden_bytes(self, text: str) -> bool:
        """Does `text` carry MIN_RUN or more consecutive bytes of a hidden file (raw, bytes repr,
        hex or base64)?"""
        return any(self._has_run(d) for d in _decodings(text))

    def _has_run(self, data: bytes) -> bool:
        blocks = self._blocks
        for i in range(0, len(data) - _BLOCK + 1):
            at = blocks.get(data[i:i + _BLOCK])
            if not at:
                continue
            for f, o in at:
                src = self._data[f]
                left = 0
                while left < o and left < i and src[o - left - 1] == data[i - left - 1]:
                    left += 1
                right = _BLOCK
                while o + right < len(src) and i + right < len(data) and src[o + right] == data[i + right]:
                    right += 1
                if left + right >= MIN_RUN:
                    return True
        return False


def _decodings(text: str) -> list[bytes]:
    out = [text.encode("utf-8", "surrogateescape")]
    if "\\" in text:
        try:
            out.append(codecs.escape_decode(text.encode("latin-1", "backslashreplace"))[0])
        except (ValueError, UnicodeError):
            pass
    for m in _HEX.finditer(text):
        h = m.group(0)
        for start in (0, 1):
            try:
                out.append(bytes.fromhex(h[start:len(h) - (len(h) - start) % 2]))
            except ValueError:
                pass
    for m in _B64.finditer(text):
        b = m.group(0).rstrip("=").replace("-", "+").replace("_", "/")
        for start in range(4):
            chunk = b[start:]
            chunk = chunk[:len(chunk) - len(chunk) % 4]
            try:
                out.append(base64.b64decode(chunk, validate=True))
            except (binascii.Error, ValueError):
                pass
    return out


@functools.lru_cache(maxsize=4)
def _filter_for(hidden: tuple[str, ...], scratch: tuple[str, ...]) -> OutputFilter:
    return OutputFilter(hidden, scratch)


def output_filter(hidden: Iterable[str] | OutputFilter | None = None, scratch: Iterable[str] = (),
                  budget: bool = True) -> OutputFilter:
    """The filter for a grading run's `hidden` list (built once per list: it reads the hidden files),
    with a fresh page budget (or none). An OutputFilter given is returned with a fresh budget."""
    if isinstance(hidden, OutputFilter):
        return hidden.for_page(budget)
    return _filter_for(tuple(hidden or ()), tuple(scratch)).for_page(budget)


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
    """Rewrites node names and addresses in text (longest names first), then filters it
    (OutputFilter.clean: hidden names, paths, bytes; no page budget)."""

    def __init__(self, labels: dict[str, str], book: dict[str, str], hidden: Iterable[str] | OutputFilter):
        self.labels = labels
        self.addr = {a: labels.get(n, "peer") for a, n in book.items()}
        self.names = sorted(labels, key=len, reverse=True)
        self.filter = output_filter(hidden, budget=False)

    def text(self, s: str) -> str:
        s = self.filter.clean(s)   # first: a hidden description may name nodes that get relabelled
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


def student_page(student: str, exercises: list[dict], findings: list[dict],
                 hidden: Iterable[str] | OutputFilter) -> str:
    """One student's page. `exercises`: [{exercise, rows: gradebook rows, failures: {property: [text]},
    counterexample: {args, expected, got} | None, diagram: html | None, diagram_title}]. Every text
    that came from the student or a finding goes through one OutputFilter (one page budget)."""
    esc = html.escape
    flt = output_filter(hidden)

    def safe(v: Any) -> str:
        return esc(flt.clean(v))

    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Feedback: {safe(student)}</title>"
             f"<style>{_CSS}</style></head><body><h1>Grading feedback for {safe(student)}</h1>"]
    total = sum(r["points"] for ex in exercises for r in ex["rows"])
    top = sum(r["max_points"] for ex in exercises for r in ex["rows"])
    parts.append(f"<p>Total: <b>{total:.2f}</b> / {top:.2f} points.</p><p><i>How points are given:</i> "
                 f"{esc(POLICY)}</p>")
    if findings:
        parts.append("<h2>Findings</h2>")
        for f in findings:
            parts.append(f"<div class='finding'><b>{safe(f['kind'])}</b> ({safe(f.get('notebook', ''))}): "
                         f"{safe(f.get('detail', ''))}</div>")
    for ex in exercises:
        parts.append(f"<h2>Exercise <code>{safe(ex['exercise'])}</code></h2><table><tr><th>property</th>"
                     "<th>points</th><th>passed</th><th>what it means</th></tr>")
        for r in ex["rows"]:
            p = PROPERTIES[r["property"]]
            ok = r["points"] >= r["max_points"]
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
                parts.append(f"<p>{safe(text)}</p>")
        # Held everywhere yet short of its points: the agreement credit scaled it (the policy).
        scaled = [r for r in ex["rows"] if r["passed"] == r["total"] and r["points"] < r["max_points"]]
        if scaled:
            parts.append("<p class='fail'>Held, but scaled by your agreement credit: "
                         + ", ".join(esc(r["property"]) for r in scaled) + ".</p>")
        ce = ex.get("counterexample")
        if ce:
            parts.append("<h3>Smallest counterexample found</h3><table>"
                         f"<tr><th>arguments</th><td><pre>{safe(json.dumps(ce['args']))}</pre></td></tr>"
                         f"<tr><th>RocketMQ's rule answers</th><td><pre>{safe(json.dumps(ce['expected']))}</pre></td></tr>"
                         f"<tr><th>your function answers</th><td><pre>{safe(json.dumps(ce['got']))}</pre></td></tr>"
                         "</table>")
        if ex.get("diagram"):
            parts.append(f"<h3>{safe(ex.get('diagram_title', ''))}</h3>"
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
