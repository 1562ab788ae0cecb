"""Sample submissions for the grader's tests and benchmark: correct; subtly wrong (e.g.
truncates to the larger end offset); nondeterministic; raising; looping forever; trying to read the
hidden workloads; trying to open a socket.

    source = VARIANTS["truncation_point"]["correct"].source
    nb = make_submission("labs/04-log-truncation.ipynb", {"truncation_point": source})
    nb = make_submission(None, {...})     # a minimal notebook: a parameters cell + one cell per exercise

`VARIANTS[exercise][name]` is a `Variant(kind, source, note)`; `kind` is the expected verdict:
"correct" (full marks), "wrong" (a property violated, a counterexample), "nondeterministic",
"raising" (finding `error`), "looping" (finding `timeout`), "reading" and "socket" (finding
`sandbox-violation`). Several correct variants per exercise are written differently on purpose
(helpers, module constants, imports) to exercise source extraction.
"""

from __future__ import annotations

from dataclasses import dataclass

import nbformat

KINDS = ("correct", "wrong", "nondeterministic", "raising", "looping", "reading", "socket")


@dataclass(frozen=True)
class Variant:
    kind: str
    source: str
    note: str = ""


def _sig(exercise: str) -> str:
    return {"truncation_point": "local, local_max, master, master_max",
            "elect_master": "candidates, old_master, prefer_broker_id",
            "sync_state_set": "sync_state_set, master_id, slaves, confirm_offset, epoch_start_offset, now_ms, "
                                  "max_not_catchup_ms",
            "transfer_ok": "next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset",
            "acting_master": "topic, broker_ids, enable_acting_master, perm"}[exercise]


FUNCTION = {"truncation_point": "truncation_point", "elect_master": "elect_master",
            "sync_state_set": "new_sync_state_set", "transfer_ok": "transfer_ok", "acting_master": "acting_master"}

# --- correct solutions (written like a student would, not copied from the reference) --------------
_TRUNC_1 = '''\
def truncation_point(local, local_max, master, master_max):
    def ends(entries, log_end):
        out = {}
        for i, (epoch, start) in enumerate(entries):
            if i + 1 < len(entries):
                out[epoch] = (start, entries[i + 1][1])
            else:
                out[epoch] = (start, log_end if start <= log_end else 2**63 - 1)
        return out

    mine, theirs = ends(local, local_max), ends(master, master_max)
    for epoch in sorted(mine, reverse=True):
        if epoch in theirs and theirs[epoch][0] == mine[epoch][0]:
            return min(mine[epoch][1], theirs[epoch][1])
    return -1
'''
_TRUNC_2 = '''\
LONG_MAX = 2**63 - 1


def end_of(entries, i, log_end):
    if i + 1 < len(entries):
        return entries[i + 1][1]
    return log_end if entries[i][1] <= log_end else LONG_MAX


def truncation_point(local, local_max, master, master_max):
    on_master = {e: (s, end_of(master, i, master_max)) for i, (e, s) in enumerate(master)}
    for i in range(len(local) - 1, -1, -1):
        epoch, start = local[i]
        if epoch in on_master and on_master[epoch][0] == start:
            return min(end_of(local, i, local_max), on_master[epoch][1])
    return -1
'''
_TRUNC_3 = '''\
import itertools as it

NO_POINT = -1


def truncation_point(local, local_max, master, master_max):
    def spans(entries, log_end):
        nexts = [s for _, s in entries[1:]] + [None]
        return {e: (s, n if n is not None else (log_end if s <= log_end else 2**63 - 1))
                for (e, s), n in zip(entries, nexts)}
    a, b = spans(local, local_max), spans(master, master_max)
    shared = [e for e in it.chain(sorted(a, reverse=True)) if e in b and a[e][0] == b[e][0]]
    return min(a[shared[0]][1], b[shared[0]][1]) if shared else NO_POINT
'''
_ELECT_1 = '''\
def elect_master(candidates, old_master, prefer_broker_id):
    ids = [c[0] for c in candidates]
    if not ids:
        return None
    if old_master in ids and (prefer_broker_id is None or prefer_broker_id == old_master):
        return old_master
    if prefer_broker_id is not None:
        return prefer_broker_id if prefer_broker_id in ids else None
    best = None
    for broker_id, live in candidates:
        key = (1, 0, 0, 0, broker_id) if live is None else (0, -live[0], -live[1], live[2], broker_id)
        if best is None or key < best[0]:
            best = (key, broker_id)
    return best[1]
'''
_ELECT_2 = '''\
def rank(candidate):
    broker_id, live = candidate
    if live is None:
        return (1, 0, 0, 0, broker_id)
    epoch, max_offset, priority = live
    return (0, -epoch, -max_offset, priority, broker_id)


def elect_master(candidates, old_master, prefer_broker_id):
    ids = {c[0] for c in candidates}
    if not ids:
        return None
    if old_master in ids and prefer_broker_id in (None, old_master):
        return old_master
    if prefer_broker_id is not None:
        return prefer_broker_id if prefer_broker_id in ids else None
    return sorted(candidates, key=rank)[0][0]
'''
_SSS_1 = '''\
def new_sync_state_set(sync_state_set, master_id, slaves, confirm_offset, epoch_start_offset, now_ms,
                       max_not_catchup_ms):
    caught_up = {s: last for s, _, last in slaves if last is not None}
    keep = set()
    for m in sync_state_set:
        if m in caught_up:
            if now_ms - caught_up[m] <= max_not_catchup_ms:
                keep.add(m)
        elif m == master_id:
            keep.add(m)
    for slave_id, ack, _ in slaves:
        if slave_id not in sync_state_set and ack is not None and ack >= max(confirm_offset, epoch_start_offset):
            keep.add(slave_id)
    return sorted(keep)
'''
_SSS_2 = '''\
def lagging(last, now_ms, limit):
    return last is None or now_ms - last > limit


def new_sync_state_set(sync_state_set, master_id, slaves, confirm_offset, epoch_start_offset, now_ms,
                       max_not_catchup_ms):
    info = {s: (ack, last) for s, ack, last in slaves}
    out = []
    for m in sync_state_set:
        if m == master_id and m not in info:
            out.append(m)
        elif m in info and not lagging(info[m][1], now_ms, max_not_catchup_ms):
            out.append(m)
    for s, (ack, _) in info.items():
        if s not in sync_state_set and ack is not None and ack >= confirm_offset and ack >= epoch_start_offset:
            out.append(s)
    return sorted(out)
'''
_XFER_1 = '''\
def transfer_ok(next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset):
    if ack_nums != -1 and ack_nums <= 1:
        return push2slave_max_offset >= next_offset
    acks = 1
    for ack in slave_ack_offsets:
        if ack >= next_offset:
            acks += 1
        if acks >= ack_nums:
            return True
    return False
'''
_XFER_2 = '''\
ALL_ACK = -1


def count_copies(offsets, upto):
    return 1 + len([a for a in offsets if a >= upto])


def transfer_ok(next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset):
    if ack_nums != ALL_ACK and ack_nums <= 1:
        return push2slave_max_offset >= next_offset
    if ack_nums == ALL_ACK:
        return len(slave_ack_offsets) > 0
    return count_copies(slave_ack_offsets, next_offset) >= ack_nums
'''

_ACT_1 = '''\
def acting_master(topic, broker_ids, enable_acting_master, perm):
    if topic.startswith("rmq_sys_SYNC_BROKER_MEMBER_"):
        return None
    if not broker_ids or 0 in broker_ids or not enable_acting_master:
        return None
    if perm & 2:
        return None
    return min(broker_ids)
'''
_ACT_2 = '''\
PERM_WRITE = 2
SYNC_TOPIC_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"


def has_master(ids):
    return any(i == 0 for i in ids)


def acting_master(topic, broker_ids, enable_acting_master, perm):
    writeable = (perm & PERM_WRITE) == PERM_WRITE
    if topic.startswith(SYNC_TOPIC_PREFIX) or writeable or not enable_acting_master:
        return None
    if len(broker_ids) == 0 or has_master(broker_ids):
        return None
    return sorted(broker_ids)[0]
'''

CORRECT = {"truncation_point": [_TRUNC_1, _TRUNC_2, _TRUNC_3], "elect_master": [_ELECT_1, _ELECT_2],
           "sync_state_set": [_SSS_1, _SSS_2], "transfer_ok": [_XFER_1, _XFER_2],
           "acting_master": [_ACT_1, _ACT_2]}

# --- subtly wrong ---------------------------------------------------------------------------------
WRONG = {
    "truncation_point": {
        "larger-end": (_TRUNC_1.replace("return min(mine[epoch][1], theirs[epoch][1])",
                                        "return max(mine[epoch][1], theirs[epoch][1])"),
                       "truncates to the larger end offset"),
        "epoch-only": (_TRUNC_1.replace("if epoch in theirs and theirs[epoch][0] == mine[epoch][0]:",
                                        "if epoch in theirs:"),
                       "matches epochs by number only, ignoring the start offset"),
    },
    "elect_master": {
        "ignores-epoch": (_ELECT_1.replace("(0, -live[0], -live[1], live[2], broker_id)",
                                           "(0, 0, -live[1], live[2], broker_id)"),
                          "ranks by max offset, ignoring the epoch"),
        "ignores-old-master": (_ELECT_1.replace(
            "    if old_master in ids and (prefer_broker_id is None or prefer_broker_id == old_master):\n"
            "        return old_master\n", ""), "re-elects even when the old master is still a candidate"),
    },
    "sync_state_set": {
        "expands-behind": (_SSS_1.replace("ack >= max(confirm_offset, epoch_start_offset)", "ack >= 0"),
                           "adds a slave that is behind the confirm offset"),
        "never-shrinks": (_SSS_1.replace("if now_ms - caught_up[m] <= max_not_catchup_ms:", "if True:"),
                          "never removes a member that stopped catching up"),
    },
    "transfer_ok": {
        "before-ack": (_XFER_1.replace("if ack >= next_offset:", "if ack >= 0:"),
                       "answers a sync write before a slave acknowledged it"),
    },
    "acting_master": {
        "largest-id": (_ACT_1.replace("return min(broker_ids)", "return max(broker_ids)"),
                       "lists the slave with the largest id as the master"),
        "rewrites-sync-topic": (_ACT_1.replace('    if topic.startswith("rmq_sys_SYNC_BROKER_MEMBER_"):\n        return None\n',
                                               ""),
                                "rewrites the member-group sync's own topic too"),
    },
}

# --- misbehaving ----------------------------------------------------------------------------------
# Answers that differ from call to call: mostly a random answer, so two evaluations differ on any
# call with near certainty (a deterministic test needs that; a subtler random tie-break is below).
_TIME_PERTURB = {
    "truncation_point": "time.time_ns() % 10**9 + 1",
    "elect_master": "time.time_ns() % 10**9 + 1",
    "sync_state_set": "sorted({time.time_ns() % 10**9 + 1})",
    "transfer_ok": "not CALL",
    "acting_master": "(CALL or 0) + 1 + time.time_ns() % 3",
}
_PERTURB = {
    "truncation_point": "random.randint(1, 10**9)",
    "elect_master": "random.randint(1, 10**9)",
    "sync_state_set": "sorted({random.randint(1, 10**9)})",
    "transfer_ok": "bool(random.getrandbits(1))",
    "acting_master": "random.choice([None, 1, 2, 3])",
}


def _wrap(exercise: str, body: str, imports: str = "") -> str:
    fn = FUNCTION[exercise]
    # a helper name of its own per exercise: a notebook holds several exercises' cells
    correct = CORRECT[exercise][0].replace(f"def {fn}(", f"def _{fn}_solution(", 1)
    return f"{imports}{correct}\n\ndef {fn}({_sig(exercise)}):\n{body}\n"


def _call(exercise: str) -> str:
    return f"_{FUNCTION[exercise]}_solution({_sig(exercise)})"


def _misbehaving(exercise: str) -> dict[str, Variant]:
    call = _call(exercise)
    v = {
        "nondeterministic": Variant("nondeterministic", _wrap(
            exercise, f"    if random.random() < 0.05:\n        return {call}\n    return {_PERTURB[exercise]}",
            "import random\n\n"), "answers at random (fresh random state in every process)"),
        "time-based": Variant("nondeterministic", _wrap(
            exercise, f"    if time.time_ns() // 1000 % 2:\n"
                      f"        return {_TIME_PERTURB[exercise].replace('CALL', call)}\n"
                      f"    return {call}", "import time\n\n"), "depends on the wall clock"),
        "raising": Variant("raising", _wrap(
            exercise, f"    answer = {call}\n    raise ValueError('forgot to return ' + repr(answer))"),
            "raises ValueError"),
        "looping": Variant("looping", _wrap(exercise, f"    while True:\n        pass\n    return {call}"),
                           "never returns"),
        "reading": Variant("reading", _wrap(
            exercise,
            "    found = []\n"
            "    for root in ('/tmp', '/work', os.path.expanduser('~'), os.environ.get('RMQLAB_WORKLOADS', '/')):\n"
            "        try:\n"
            "            found += glob.glob(os.path.join(root, '**', '*.parquet'), recursive=True)[:5]\n"
            "        except OSError:\n"
            "            pass\n"
            "    for path in found:\n"
            "        try:\n"
            "            with open(path, 'rb') as f:\n"
            "                f.read(16)\n"
            "        except OSError:\n"
            "            pass\n"
            f"    return {call}", "import glob\nimport os\n\n"),
            "looks for the hidden workloads (*.parquet) and swallows the errors"),
        "socket": Variant("socket", _wrap(
            exercise,
            "    try:\n"
            "        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "        s.settimeout(0.2)\n"
            "        s.connect(('127.0.0.1', 9))\n"
            "        s.close()\n"
            "    except OSError:\n"
            "        pass\n"
            f"    return {call}", "import socket\n\n"), "opens a TCP connection and swallows the error"),
    }
    return v


def _variants() -> dict[str, dict[str, Variant]]:
    out: dict[str, dict[str, Variant]] = {}
    for exercise in FUNCTION:
        v: dict[str, Variant] = {}
        for i, src in enumerate(CORRECT[exercise]):
            v["correct" if i == 0 else f"correct-{i + 1}"] = Variant("correct", src)
        for name, (src, note) in WRONG[exercise].items():
            v[name] = Variant("wrong", src, note)
        v.update(_misbehaving(exercise))
        out[exercise] = v
    tie = _ELECT_1.replace("        if best is None or key < best[0]:\n            best = (key, broker_id)\n",
                           "        if best is None or key[:4] < best[0][:4] or (key[:4] == best[0][:4] and "
                           "random.random() < 0.5):\n            best = (key, broker_id)\n")
    out["elect_master"]["random-tie-break"] = Variant("nondeterministic", "import random\n\n\n" + tie,
                                                      "breaks ties between equally good candidates at random")
    return out


VARIANTS: dict[str, dict[str, Variant]] = _variants()


def _find_exercise_cell(nb, exercise: str, function: str):
    for cell in nb.cells:
        if cell.cell_type == "code" and (cell.metadata.get("rmqlab") or {}).get("exercise") == exercise:
            return cell
    for cell in nb.cells:   # a lab notebook not (yet) carrying the metadata
        if cell.cell_type == "code" and f"def {function}(" in cell.source:
            return cell
    return None


def make_submission(lab_notebook_path: str | None, sources: dict[str, str]):
    """A submission: the lab notebook (or, with None, a minimal notebook: a `parameters` cell and one
    cell per exercise) with each exercise cell's source replaced by `sources[exercise]`."""
    if lab_notebook_path is None:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        nb.cells.append(nbformat.v4.new_code_cell("seed = 7\ngrading = False", metadata={"tags": ["parameters"]}))
        for exercise in sources:
            nb.cells.append(nbformat.v4.new_code_cell(
                "", metadata={"tags": ["exercise"], "rmqlab": {"exercise": exercise}}))
        nb.metadata["rmqlab"] = {"lab": "sample", "exercises": list(sources)}
    else:
        nb = nbformat.read(lab_notebook_path, as_version=4)
    meta = nb.metadata.setdefault("rmqlab", {})
    names = list(meta.get("exercises") or [])
    for exercise, source in sources.items():
        if exercise not in FUNCTION:
            raise ValueError(f"make_submission: unknown exercise {exercise!r} (known: {', '.join(FUNCTION)})")
        cell = _find_exercise_cell(nb, exercise, FUNCTION[exercise])
        if cell is None:
            raise ValueError(f"make_submission: {lab_notebook_path} has no cell for exercise {exercise!r}")
        cell.source = source
        cell.outputs = []
        cell.execution_count = None
        if exercise not in names:
            names.append(exercise)
    meta["exercises"] = names
    return nb
