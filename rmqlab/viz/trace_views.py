"""Small views of the trace that several widgets share: what each node is doing now."""

from __future__ import annotations

from collections.abc import Iterable

from rmqlab.trace.event import TraceEvent

_DOWN = ("node.kill", "node.crash", "node.stop")
# Which component's role names a node's role, in order of preference: a broker's role (SYNC_MASTER,
# SLAVE ...) says more than its HA service's; a controller's is its Raft role.
_ROLE_COMPONENTS = ("broker", "raft", "controller", "proxy", None)


def node_states(events: Iterable[TraceEvent]) -> dict[str, dict]:
    """node -> {"up", "suspended", "how", "role", "epoch", "term"}: the node's state after `events`.

    "up" follows node.start and node.kill/crash/stop; "how" says how it went down ("kill",
    "crash", "stop") or None; "role" is its latest role (a broker's, else its Raft role), kept
    while the node is down so a display can say what it was; "epoch" is the master epoch and
    "term" the Raft term that came with that role (None when it carried none)."""
    states: dict[str, dict] = {}
    roles: dict[str, dict] = {}
    terms: dict[str, int] = {}
    for e in events:
        if e.kind == "node.start":
            states[e.node] = {"up": True, "suspended": False, "how": None}
        elif e.kind in _DOWN:
            st = states.setdefault(e.node, {})
            st.update(up=False, suspended=False, how=e.kind.split(".", 1)[1])
        elif e.kind in ("node.suspend", "node.resume"):
            states.setdefault(e.node, {"up": True, "how": None})["suspended"] = e.kind == "node.suspend"
        elif e.kind == "role":
            roles.setdefault(e.node, {})[e.fields.get("component")] = e.fields
        elif e.kind == "raft":  # a follower learns of a new term without changing role
            terms[e.node] = e.fields["term"]
    out = {}
    for node in sorted(set(states) | set(roles)):
        st = states.get(node, {"up": False, "suspended": False, "how": None})
        mine = roles.get(node, {})
        role = next((mine[c] for c in _ROLE_COMPONENTS if c in mine), {})
        out[node] = {"up": st.get("up", False), "suspended": st.get("suspended", False), "how": st.get("how"),
                     "role": role.get("to"), "epoch": role.get("epoch"),
                     "term": terms.get(node, role.get("term")) if "term" in role else None}
    return out


def describe_state(state: dict) -> str:
    """One line for a role display: "SYNC_MASTER (epoch 2)", "down: crash (was SLAVE)", "up" (a
    node without a role: a name server), ..."""
    role = state["role"] or "up"
    if state["role"] and state.get("epoch") is not None:
        role += f" (epoch {state['epoch']})"
    elif state["role"] and state.get("term") is not None:
        role += f" (term {state['term']})"
    if not state["up"]:
        return f"down: {state['how'] or 'not started'}" + (f" (was {state['role']})" if state["role"] else "")
    return role + (", suspended" if state["suspended"] else "")
