"""The frame inspector: one HA frame's bytes, annotated field by field, for both HA protocols.

An HA `frame.send` / `frame.recv` event carries the frame's bytes as `hex` (the header, and at
most a short preview of a transfer's commitlog bytes, rmqlab.ha.ha_protocol.HEX_BODY_PREVIEW).
`annotate` cuts those bytes along the protocol's own layouts — the `FrameLayout`s the codecs of
rmqlab.ha.default_ha_protocol (classic: RocketMQ's DefaultHAService) and
rmqlab.ha.autoswitch.auto_switch_ha_protocol (controller mode: AutoSwitchHAConnection and
AutoSwitchHAClient, described in RocketMQ's controller design document) pack and unpack with — and
decodes each field.
Which layout a frame has follows from its event: classic frames are `report` (slave → master) and
`transfer` / `heartbeat` without an `epoch`; controller mode's are `handshake`, `ack`, and
`transfer` / `heartbeat` with one.

Views: `format_frame` (plain text, for checked notebook outputs), `frame_html` (coloured bytes and
a field table, for widgets), `frame_figure` (the bytes as a grid, a static plotly figure), and
`protocol_table` (every frame of both protocols, field by field, from the layouts alone).
"""

from __future__ import annotations

import html
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from rmqlab.ha import default_ha_protocol as classic
from rmqlab.ha.autoswitch import auto_switch_ha_protocol as autoswitch
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.ha_protocol import FrameLayout
from rmqlab.trace.event import TraceEvent
from rmqlab.viz.lamport import FrameHop

AUTOSWITCH = "AutoSwitch (controller mode)"
CLASSIC = "classic (DefaultHAService)"

# Field -> (the name RocketMQ's code and its design document use, what it means).
FIELDS: dict[str, tuple[str, str]] = {
    "state": ("currentState", "the sender's HAConnectionState (wire value = ordinal: 1 HANDSHAKE, 2 TRANSFER)"),
    "is_sync_from_last_file": ("isSyncFromLastFile", "1: an empty slave starts at the master's last commitlog file"),
    "is_async_learner": ("isAsyncLearner", "1: replicate, but never join the SyncStateSet"),
    "slave_broker_id": ("slaveBrokerId", "the slave's controller-assigned id: how it joins the SyncStateSet"),
    "slave_max_offset": ("maxOffset", "where the slave's commitlog ends: the first one is the request, "
                                      "each one an ack"),
    "body_size": ("bodySize", "bytes after the header (0: a heartbeat)"),
    "max_phy_offset": ("offset", "the master's commitlog max offset"),
    "last_epoch": ("epoch", "the master's epoch (the last of its epoch file; -1: none)"),
    "epoch": ("epoch", "the epoch the batch's bytes belong to: one batch never spans two"),
    "start_offset": ("startOffset", "where that epoch's log starts"),
    "offset": ("offset", "commitlog offset of the first body byte (heartbeat: where the next batch starts)"),
    "epoch_start_offset": ("epochStartOffset", "where that epoch starts: a slave seeing a new epoch records "
                                               "(epoch, epochStartOffset)"),
    "confirm_offset": ("confirmOffset", "the smallest max offset in the SyncStateSet: what readers may see"),
    "physic_offset": ("physicOffset", "commitlog offset of the first body byte (heartbeat: the next one)"),
    "body": ("body", "commitlog bytes, exactly as stored (messages)"),
}
# The master handshake's epoch entries (its EpochFileCache, ascending).
ENTRY_MEANINGS = {"epoch": "an epoch of the master's epoch file", "start_offset": "the offset where it starts"}
# Background colour per field, for frame_html and frame_figure.
COLOURS = {"state": "#d9d2e9", "is_sync_from_last_file": "#fce5cd", "is_async_learner": "#fff2cc",
           "slave_broker_id": "#d9ead3", "slave_max_offset": "#cfe2f3", "body_size": "#fce5cd",
           "max_phy_offset": "#cfe2f3", "last_epoch": "#f4cccc", "epoch": "#f4cccc", "start_offset": "#d0e0e3",
           "offset": "#cfe2f3", "epoch_start_offset": "#d0e0e3", "confirm_offset": "#d9ead3",
           "physic_offset": "#cfe2f3", "body": "#eeeeee", "entry epoch": "#ead1dc", "entry start_offset": "#fff2cc"}


@dataclass(frozen=True)
class FieldSpan:
    """One field of a frame: bytes [start, start + size) of it."""

    start: int
    size: int
    name: str      # the layout's field name (snake_case, as the trace's fields)
    label: str     # RocketMQ's name for it
    raw: bytes
    value: Any
    meaning: str

    @property
    def key(self) -> str:
        """The field's colour and legend key: an epoch entry's fields apart from the header's."""
        return f"entry {self.name}" if self.label.endswith("]") else self.name

    def shown(self) -> str:
        """The value as the inspector prints it."""
        if self.name == "state":
            try:
                return f"{self.value} ({HAConnectionState(self.value).name})"
            except ValueError:
                return f"{self.value} (not a state)"
        if self.name in ("is_sync_from_last_file", "is_async_learner"):
            return f"{self.value} ({'true' if self.value == 1 else 'false'})"
        if self.name == "body":
            return f"{len(self.raw)} bytes shown"
        return str(self.value)


@dataclass(frozen=True)
class FrameAnnotation:
    protocol: str        # AUTOSWITCH or CLASSIC
    kind: str            # handshake, ack, transfer, heartbeat, report
    direction: str       # "slave->master" or "master->slave"
    size: int            # bytes on the wire
    spans: tuple[FieldSpan, ...]

    @property
    def shown_size(self) -> int:
        """Bytes the trace carries (a transfer's body only as a preview)."""
        return sum(s.size for s in self.spans)

    def decoded(self) -> dict[str, Any]:
        """The header fields by name (the epoch entries as `entries`, a list of (epoch, start))."""
        out: dict[str, Any] = {}
        entries: list[list[int]] = []
        for s in self.spans:
            if s.name == "body":
                continue
            if s.key != s.name:  # a field of epoch entry i
                if s.name == "epoch":
                    entries.append([s.value])
                else:
                    entries[-1].append(s.value)
            else:
                out[s.name] = s.value
        if self.kind == "handshake" and self.direction == "master->slave":
            out["entries"] = entries
        return out


def _sizes(layout: FrameLayout) -> list[int]:
    fmt = layout.codec.format.lstrip("<>!=@")
    return [struct.calcsize(">" + c) for c in fmt]


def _layout(fields: dict) -> tuple[str, str, list[FrameLayout]]:
    """(protocol, direction, the layouts the frame is made of) for an HA frame event's fields."""
    name = fields.get("name")
    if name == "report":
        return CLASSIC, "slave->master", [classic.REPORT]
    if name == "ack":
        return AUTOSWITCH, "slave->master", [autoswitch.SLAVE_TRANSFER]
    if name == "handshake":
        if "slave_broker_id" in fields:
            return AUTOSWITCH, "slave->master", [autoswitch.SLAVE_HANDSHAKE]
        return AUTOSWITCH, "master->slave", [autoswitch.MASTER_HANDSHAKE_HEADER]
    if name in ("transfer", "heartbeat"):
        if "epoch" in fields:
            return AUTOSWITCH, "master->slave", [autoswitch.MASTER_TRANSFER_HEADER]
        return CLASSIC, "master->slave", [classic.TRANSFER_HEADER]
    raise ValueError(f"not an HA frame the inspector knows: name {name!r}")


def _event_of(frame: TraceEvent | FrameHop) -> TraceEvent:
    return frame.event if isinstance(frame, FrameHop) else frame


def annotate(frame: TraceEvent | FrameHop) -> FrameAnnotation:
    """Cut the frame's traced bytes (`hex`) along its protocol's layout and decode every field."""
    event = _event_of(frame)
    fields = event.fields
    if fields.get("proto") != "ha" or "hex" not in fields:
        raise ValueError(f"event {event.seq} ({event.kind} at {event.node}) is not an HA frame with its bytes (hex)")
    data = bytes.fromhex(fields["hex"])
    protocol, direction, (layout,) = _layout(fields)
    spans: list[FieldSpan] = []
    pos = 0

    def cut(lay: FrameLayout, suffix: str = "") -> None:
        nonlocal pos
        if len(data) < pos + lay.size:
            raise ValueError(f"event {event.seq}: {len(data)} bytes traced, the {lay.name} layout needs "
                             f"{pos + lay.size}")
        values = lay.codec.unpack_from(data, pos)
        for name, size, value in zip(lay.fields, _sizes(lay), values):
            label, meaning = FIELDS[name]
            spans.append(FieldSpan(pos, size, name, label + suffix, data[pos:pos + size], value,
                                   ENTRY_MEANINGS[name] if suffix else meaning))
            pos += size

    cut(layout)
    kind = str(fields["name"])
    if layout is autoswitch.MASTER_HANDSHAKE_HEADER:
        body_size = spans[1].value
        for i in range(min(body_size, len(data) - pos) // autoswitch.EPOCH_ENTRY_SIZE):
            cut(autoswitch.EPOCH_ENTRY, f"[{i}]")
    if pos < len(data):
        label, meaning = FIELDS["body"]
        spans.append(FieldSpan(pos, len(data) - pos, "body", label, data[pos:], data[pos:].hex(), meaning))
    return FrameAnnotation(protocol, kind, direction, int(fields.get("size", len(data))), tuple(spans))


def _ends(frame: TraceEvent | FrameHop, book: dict[str, str] | None) -> tuple[str, str]:
    if isinstance(frame, FrameHop):
        return frame.src, frame.dst
    peer = str(frame.fields.get("peer", "?"))
    peer = (book or {}).get(peer, peer)
    return (frame.node, peer) if frame.kind == "frame.send" else (peer, frame.node)


def _title(frame: TraceEvent | FrameHop, ann: FrameAnnotation, book: dict[str, str] | None) -> str:
    src, dst = _ends(frame, book)
    more = f", {ann.shown_size} shown" if ann.shown_size < ann.size else ""
    return f"{src} → {dst}: {ann.kind} ({ann.protocol}, {ann.direction}), {ann.size} bytes{more}"


def format_frame(frame: TraceEvent | FrameHop, book: dict[str, str] | None = None, meanings: bool = True) -> str:
    """The frame as a text table: byte range, field, hex, decoded value (and what it means)."""
    ann = annotate(frame)
    lines = [_title(frame, ann, book)]
    for s in ann.spans:
        raw = s.raw.hex() if s.name != "body" else s.raw.hex()[:32] + ("…" if len(s.raw) > 16 else "")
        line = f"  {s.start:>3}-{s.start + s.size - 1:<3} {s.label:<18} {raw:<32} {s.shown()}"
        if meanings:
            line = f"{line:<90} {s.meaning}"
        lines.append(line.rstrip())
    return "\n".join(lines)


def frame_html(frame: TraceEvent | FrameHop, book: dict[str, str] | None = None) -> str:
    """The frame's bytes coloured by field, then the decoded fields, as an HTML fragment."""
    ann = annotate(frame)
    cells = []
    for s in ann.spans:
        tip = html.escape(f"{s.label}: {s.shown()}")
        for i in range(s.size):
            cells.append(f"<span title='{tip}' style='background:{COLOURS[s.key]};font-family:monospace;"
                         f"padding:1px 2px;margin:0 1px 1px 0;display:inline-block'>{s.raw[i]:02x}</span>")
    rows = "".join(
        f"<tr><td style='font-family:monospace'>{s.start}–{s.start + s.size - 1}</td>"
        f"<td style='background:{COLOURS[s.key]}'><b>{html.escape(s.label)}</b></td>"
        f"<td style='font-family:monospace'>{html.escape(s.shown())}</td>"
        f"<td style='color:#555'>{html.escape(s.meaning)}</td></tr>" for s in ann.spans)
    return (f"<div class='rmqlab-frame'><div><b>{html.escape(_title(frame, ann, book))}</b></div>"
            f"<div style='max-width:46em;line-height:1.6'>{''.join(cells)}</div>"
            f"<table style='font-size:90%'><tr><th>bytes</th><th>field</th><th>value</th><th>meaning</th></tr>"
            f"{rows}</table></div>")


def frame_figure(frame: TraceEvent | FrameHop, book: dict[str, str] | None = None, per_row: int = 16) -> go.Figure:
    """The frame's bytes as a grid (`per_row` a row), each byte coloured by its field, hex inside."""
    ann = annotate(frame)
    names = list(dict.fromkeys(s.key for s in ann.spans))
    z, text, hover = [], [], []
    for s in ann.spans:
        for i in range(s.size):
            z.append(names.index(s.key))
            text.append(f"{s.raw[i]:02x}")
            hover.append(f"byte {s.start + i}: {s.label} = {s.shown()}")
    rows = (len(z) + per_row - 1) // per_row
    pad = rows * per_row - len(z)
    z += [None] * pad
    text += [""] * pad
    hover += [""] * pad
    grid = [z[r * per_row:(r + 1) * per_row] for r in range(rows)]
    colours = [COLOURS[n] for n in names]
    scale = [[i / max(len(names) - 1, 1), c] for i, c in enumerate(colours)] if len(names) > 1 else \
        [[0, colours[0]], [1, colours[0]]]
    fig = go.Figure(go.Heatmap(
        z=grid, text=[text[r * per_row:(r + 1) * per_row] for r in range(rows)], texttemplate="%{text}",
        hovertext=[hover[r * per_row:(r + 1) * per_row] for r in range(rows)], hoverinfo="text",
        colorscale=scale, zmin=0, zmax=max(len(names) - 1, 1), showscale=False, xgap=2, ygap=2))
    # One legend entry per field, in frame order (an epoch entry's fields once).
    labels = {s.key: s.label.split("[")[0] + ("[i]" if s.key != s.name else "") for s in ann.spans}
    for key in names:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=labels[key],
                                 marker=dict(symbol="square", size=12, color=COLOURS[key])))
    fig.update_layout(title=_title(frame, ann, book), height=150 + 34 * rows, margin=dict(l=40, r=20, t=100, b=30),
                      xaxis=dict(dtick=1, showgrid=False, zeroline=False, side="top"),
                      yaxis=dict(autorange="reversed", tickmode="array", tickvals=list(range(rows)),
                                 ticktext=[str(r * per_row) for r in range(rows)], showgrid=False, zeroline=False),
                      legend=dict(orientation="h", y=-0.05, yanchor="top"), plot_bgcolor="white")
    return fig


# -- the protocols, from their layouts alone -----------------------------------------------------
PROTOCOL_FRAMES: tuple[tuple[str, str, str, tuple[FrameLayout, ...], str], ...] = (
    (CLASSIC, "report", "slave->master", (classic.REPORT,), ""),
    (CLASSIC, "transfer", "master->slave", (classic.TRANSFER_HEADER,), "+ bodySize bytes of commitlog"),
    (AUTOSWITCH, "handshake", "slave->master", (autoswitch.SLAVE_HANDSHAKE,), ""),
    (AUTOSWITCH, "handshake", "master->slave", (autoswitch.MASTER_HANDSHAKE_HEADER,),
     f"+ n × (epoch int, startOffset long), {autoswitch.EPOCH_ENTRY_SIZE} bytes each"),
    (AUTOSWITCH, "ack", "slave->master", (autoswitch.SLAVE_TRANSFER,), ""),
    (AUTOSWITCH, "transfer", "master->slave", (autoswitch.MASTER_TRANSFER_HEADER,), "+ bodySize bytes of commitlog"),
)


def protocol_table(protocols: Iterable[str] = (CLASSIC, AUTOSWITCH)) -> str:
    """Every frame of the given protocols, field by field (offset, size, Java type, name)."""
    java = {1: "byte", 2: "short", 4: "int", 8: "long"}
    lines = []
    for protocol, kind, direction, layouts, after in PROTOCOL_FRAMES:
        if protocol not in protocols:
            continue
        size = sum(lay.size for lay in layouts)
        lines.append(f"{protocol} {kind}, {direction}: {size}-byte header {after}".rstrip())
        pos = 0
        for lay in layouts:
            for name, width in zip(lay.fields, _sizes(lay)):
                lines.append(f"  {pos:>3}  {java[width]:<5} {FIELDS[name][0]}")
                pos += width
    return "\n".join(lines)


# -- the exercise: decode a controller-mode TRANSFER header by hand ------------------------------
def transfer_samples(events: Sequence[TraceEvent], n: int = 3) -> list[tuple[str, dict[str, int]]]:
    """Up to `n` controller-mode TRANSFER headers the trace holds (received frames with a body):
    (the header's 36 bytes as hex, its fields as the slave decoded them)."""
    out = []
    for e in events:
        if e.kind == "frame.recv" and e.fields.get("proto") == "ha" and e.fields.get("name") == "transfer" \
                and "epoch" in e.fields and "hex" in e.fields:
            header = e.fields["hex"][:2 * autoswitch.MASTER_TRANSFER_HEADER_SIZE]
            expected = {"state": HAConnectionState.TRANSFER.value, "body_size": e.fields["body_size"],
                        "offset": e.fields["offset"], "epoch": e.fields["epoch"],
                        "epoch_start_offset": e.fields["epoch_start_offset"],
                        "confirm_offset": e.fields["confirm_offset"]}
            out.append((header, expected))
            if len(out) == n:
                break
    return out


def check_transfer_decoder(decode: Callable[[bytes], dict], samples: Sequence[tuple[str, dict[str, int]]]) -> int:
    """Run `decode(header_bytes)` on every sample; AssertionError says which field of which frame
    is wrong. Returns how many frames passed."""
    assert samples, "no TRANSFER frame in the trace to check against"
    for i, (header, expected) in enumerate(samples):
        got = decode(bytes.fromhex(header))
        assert isinstance(got, dict), f"frame {i}: decode returned {type(got).__name__}, expected a dict"
        for name, value in expected.items():
            assert name in got, f"frame {i} ({header}): no {name!r} in what decode returned ({sorted(got)})"
            assert got[name] == value, (f"frame {i} ({header}): {name} decoded as {got[name]!r}, the slave "
                                        f"read {value!r}")
    return len(samples)


__all__ = ["AUTOSWITCH", "CLASSIC", "FieldSpan", "FrameAnnotation", "annotate", "format_frame", "frame_html",
           "frame_figure", "protocol_table", "transfer_samples", "check_transfer_decoder"]
