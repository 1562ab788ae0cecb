"""Lab 01's last experiment: a transactional producer and an orderly consumer through a master's
death, in each mode where the feature has something to lose. The runs are the catalog's workloads
(rmqlab.workload.catalog, recorded in datasets/workloads/): the same cluster, client settings and
fault (the master of broker-a killed 5 s in, back at 13 s) per mode, so `rmqlab replay NAME`
reproduces any row.

The classic master–slave row has no orderly run: while its master is down, a RocketMQ 5 slave
answers every pull that finds nothing with PULL_RETRY_IMMEDIATELY (PullMessageProcessor, when the
group's minBrokerIdInGroup is 0, as it is without RIP-32) and a caught-up consumer asks again at
once — tens of thousands of pulls in the outage, minutes of simulation on one CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.checker.order import check_order
from rmqlab.common.cpu_quota import available_processors
from rmqlab.trace import TraceEvent
from rmqlab.viz.guarantees import orderly_consume_times, orderly_waits, transactions, workload_t0
from rmqlab.workload.catalog import CATALOG
from rmqlab.workload.runner import run_workload

# (row label, transactional workload, orderly workload or None)
MODES = (
    ("classic master–slave (2m-2s-async)", "tx-async-kill-master", None),
    ("controller mode (embedded)", "tx-ctrl-embedded-kill-master", "orderly-ctrl-embedded-kill-master"),
    ("slave acting master (RIP-32)", "tx-acting-kill-master", "orderly-acting-kill-master"),
)


def _events(name: str) -> list[TraceEvent]:
    return run_workload(CATALOG[name]).events


def run_guarantees(workers: int = 1) -> dict[str, list[TraceEvent]]:
    """Workload name -> trace, for every workload of MODES (`workers` processes at once, at most
    the CPUs this process may use: each run is seeded, so the traces are the same either way)."""
    names = [n for _, tx, orderly in MODES for n in (tx, orderly) if n]
    workers = min(workers, available_processors(), len(names))
    if workers <= 1:
        return {n: _events(n) for n in names}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver")) as pool:
        return dict(zip(names, pool.map(_events, names)))


@dataclass(frozen=True)
class GuaranteeRow:
    mode: str
    transactions: int             # half messages stored
    committed: int                # first ended COMMITTED within the run
    rolled_back: int              # first ended ROLLED_BACK or DISCARDED
    committed_twice: int          # COMMITTED more than once (delivered more than once)
    never_ended: int
    longest_wait_s: float         # from the half message to its outcome (the run's end if none)
    orderly_consumed: int | None  # None: no orderly run for this mode
    out_of_order: int | None
    orderly_longest_wait_s: float | None  # the longest from an ordered send to its first consumption
    orderly_never: int | None     # ordered messages sent and not consumed in the run


def rows(runs: dict[str, list[TraceEvent]]) -> list[GuaranteeRow]:
    out = []
    for label, tx_name, orderly_name in MODES:
        events = runs[tx_name]
        txs = transactions(events)
        end = events[-1].time_ms
        waits = [((t.ended_ms if t.ended_ms is not None else end) - t.begun_ms) / 1000 for t in txs]
        consumed = out_of_order = longest = never = None
        if orderly_name:
            ev = runs[orderly_name]
            consumed = len(orderly_consume_times(ev))
            out_of_order = check_order(ev).stats["out_of_order"]
            ordered = orderly_waits(ev)
            longest = max((w for w in ordered.values() if w is not None), default=0.0)
            never = sum(w is None for w in ordered.values())
        out.append(GuaranteeRow(label, len(txs), sum(t.outcome == "COMMITTED" for t in txs),
                                sum(t.outcome in ("ROLLED_BACK", "DISCARDED") for t in txs),
                                sum(t.commits > 1 for t in txs), sum(t.ended_ms is None for t in txs),
                                max(waits, default=0.0), consumed, out_of_order, longest, never))
    return out


def table_html(rows_: list[GuaranteeRow]) -> str:
    def cell(v, fmt="{}"):
        return "—" if v is None else fmt.format(v)
    head = ("mode", "transactions", "committed", "rolled back or discarded", "committed more than once",
            "never ended", "longest wait for the outcome (s)",
            "orderly consumptions", "out of order", "longest wait of an ordered message (s)",
            "ordered messages never consumed")
    body = "".join(
        "<tr>" + "".join(f"<td>{c}</td>" for c in (
            r.mode, r.transactions, r.committed, r.rolled_back, r.committed_twice, r.never_ended,
            f"{r.longest_wait_s:.1f}",
            cell(r.orderly_consumed), cell(r.out_of_order), cell(r.orderly_longest_wait_s, "{:.1f}"),
            cell(r.orderly_never))) + "</tr>"
        for r in rows_)
    return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + f"</tr></thead><tbody>{body}</tbody></table>")


def tx_runs(runs: dict[str, list[TraceEvent]]) -> dict[str, list[TraceEvent]]:
    return {label: runs[tx] for label, tx, _ in MODES}


def orderly_runs(runs: dict[str, list[TraceEvent]]) -> dict[str, list[TraceEvent]]:
    return {label: runs[o] for label, _, o in MODES if o}


__all__ = ["MODES", "GuaranteeRow", "run_guarantees", "rows", "table_html", "tx_runs", "orderly_runs", "workload_t0"]
