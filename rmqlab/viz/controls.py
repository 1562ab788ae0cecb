"""FaultPanel: the labs' fault buttons — kill, crash, restart, suspend, resume or isolate any node,
heal the network, let virtual time run — with a role display, all read back from the trace (in
DLedger CommitLog mode a member's DLedger role and term beside its broker role).

A click and a call do the same thing: `panel.act("kill", "broker-a")` injects the fault through
the cluster's nemesis (the one fault API of rmqlab.runtime.nemesis), lets `step_ms` of virtual time
pass so the system reacts, then redraws the role display and calls every `on_change` callback
with the trace. Headless runs (papermill, nbval) call `act`; a student clicks. A fault the
nemesis refuses (restarting a running node, say) is shown in the status line, not raised, so a
stray click never breaks the notebook.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable

import ipywidgets as widgets

from rmqlab.viz.trace_views import describe_state, node_states

NODE_ACTIONS = ("kill", "crash", "restart", "suspend", "resume", "partition")
# What each action is, for the buttons' tooltips (the OpenChaos faults of the article
# "一文详解 RocketMQ 如何利用 Raft 进行高可用保障").
TOOLTIPS = {
    "kill": "kill -9 the process: what it wrote survives in the page cache",
    "crash": "the machine loses power: every byte not flushed to disk is lost",
    "restart": "start the node's process again, same configuration, same disk",
    "suspend": "SIGSTOP: frozen, connections stay open",
    "resume": "SIGCONT",
    "partition": "cut every link between this node and all the others",
    "heal": "remove every network fault",
}


class FaultPanel:
    def __init__(self, cluster, nodes: Iterable[str] | None = None, step_ms: float = 2_000):
        """`nodes`: the nodes that get buttons (default: every server node, no clients)."""
        self.cluster, self.step_ms = cluster, step_ms
        self.nodes = list(nodes) if nodes is not None else self._server_nodes()
        self._callbacks: list[Callable[[list], None]] = []
        self.last_action: str | None = None
        self.roles = widgets.HTML()
        self.roles.add_class("rmqlab-roles")
        self.status = widgets.HTML()
        self.status.add_class("rmqlab-status")
        rows = [widgets.HBox([widgets.Label(node, layout=widgets.Layout(width="10em", flex="0 0 auto"))]
                             + [self._button(action, node) for action in NODE_ACTIONS],
                             layout=widgets.Layout(overflow="auto hidden")) for node in self.nodes]
        run_row = widgets.HBox([self._button("heal"), self._button("run", ms=2_000), self._button("run", ms=10_000)])
        self.widget = widgets.VBox([self.roles, *rows, run_row, self.status])
        self.refresh()

    def _server_nodes(self) -> list[str]:
        from rmqlab.cluster import ADMIN_NODE

        return [n for n in self.cluster.nemesis.node_names() if n not in self.cluster.clients and n != ADMIN_NODE]

    def _button(self, action: str, node: str | None = None, ms: float | None = None) -> widgets.Button:
        label = f"{action} {node}" if node else (f"run {ms / 1000:g} s" if ms else action)
        # flex 0 0 auto: a row wider than the notebook scrolls instead of cutting the labels short.
        button = widgets.Button(description=label, tooltip=TOOLTIPS.get(action, "let virtual time pass"),
                                layout=widgets.Layout(width="auto", flex="0 0 auto"))
        if action == "run":
            button.on_click(lambda _b: self.run(ms))
        else:
            button.on_click(lambda _b: self.act(action, node))
        return button

    def on_change(self, callback: Callable[[list], None]) -> None:
        """`callback(events)` after every action (redraw a figure from the trace here)."""
        self._callbacks.append(callback)

    def act(self, action: str, node: str | None = None) -> bool:
        """Inject `action` on `node` (or "heal"), run `step_ms`, redraw. False if it was refused."""
        nemesis = self.cluster.nemesis
        label = f"{action} {node}" if node else action
        try:
            if action == "heal":
                nemesis.heal()
            elif action == "partition":
                others = [n for n in nemesis.node_names() if n != node]
                nemesis.partition([node], others)
            elif action in NODE_ACTIONS:
                if node not in self.nodes:
                    raise ValueError(f"unknown node {node!r} (nodes: {', '.join(self.nodes)})")
                getattr(nemesis, action)(node)
            else:
                raise ValueError(f"unknown action {action!r} (actions: {', '.join(NODE_ACTIONS)}, heal)")
        except Exception as e:  # shown, not raised: see the module docstring
            self.last_action = f"{label}: refused ({e})"
            self.refresh()
            return False
        self.last_action = label
        self.run(self.step_ms)
        return True

    def run(self, ms: float) -> None:
        """Let `ms` of (virtual) time pass, then redraw and call back."""
        self.cluster.run_for(ms)
        self.refresh()
        events = self.cluster.events()
        for callback in self._callbacks:
            callback(events)

    def refresh(self) -> None:
        events = self.cluster.events()
        states, raft = node_states(events), dledger_roles(events)
        cells = "".join(
            f"<tr><td style='padding-right:1em'><b>{html.escape(n)}</b></td>"
            f"<td>{html.escape(describe_member(states[n], raft.get(n)) if n in states else 'not started')}</td></tr>"
            for n in self.nodes)
        self.roles.value = f"<table class='rmqlab-role-table'>{cells}</table>"
        clock = f"t = {self.cluster.sim.now_ms() / 1000:.1f} s virtual" if self.cluster.runtime == "sim" else "real time"
        last = f" · last action: {html.escape(self.last_action)}" if self.last_action else ""
        self.status.value = f"<span>{clock} · {len(events)} trace events{last}</span>"


def dledger_roles(events: Iterable) -> dict[str, tuple[str, int]]:
    """DLedger CommitLog mode: member node -> (its DLedger role, term) from its last `dledger.role`
    event in its current incarnation (none while it is down or before it has started its elector)."""
    out: dict[str, tuple[str, int]] = {}
    for e in events:
        if e.kind == "dledger.role":
            out[e.node] = (e.fields["role"], e.fields["term"])
        elif e.kind in ("node.kill", "node.crash", "node.stop", "node.start"):
            out.pop(e.node, None)
    return out


def describe_member(state: dict, raft: tuple[str, int] | None) -> str:
    """describe_state, and for a running DLedger member its Raft role beside its broker role: the
    broker role follows the Raft role (DLedgerRoleChangeHandler), a leader becomes master only once
    it has applied its log, so the two can differ for a moment. The DLedger term stands in for the
    epoch there (the handler traces the term as the broker's epoch)."""
    if raft is None or not state["up"]:
        return describe_state(state)
    role, term = raft
    broker = state["role"] or "no broker role yet"
    return f"{broker} · DLedger {role}, term {term}" + (", suspended" if state["suspended"] else "")
