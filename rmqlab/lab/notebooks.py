"""Execute the lab notebooks headless and store them the way they are committed.

    python -m rmqlab.lab.notebooks execute labs/01-deployment-modes.ipynb ...   # run, strip, save in place
    python -m rmqlab.lab.notebooks strip labs/*.ipynb                            # strip only
    python -m rmqlab.lab.notebooks check labs/*.ipynb                            # the committed form, checked

A committed notebook keeps its outputs (nbval compares the cells tagged `nbval-check-output`
against them) but no widget state: nbclient stores every widget model in `metadata.widgets`, and a
plotly FigureWidget's model carries the whole plotly.js bundle (about 5 MB). A
widget's output is only a reference to that state, useless without it, so it goes too; a student
sees the widget when the cell runs. Execution timestamps are not recorded, so re-running an
unchanged notebook gives the same file.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MAX_BYTES = 1024 * 1024  # each notebook under 1 MiB: it is committed with its outputs
# What a student can open: RocketMQ's documentation site, its repository (source, docs, wiki), or a
# published article named by title. A lab cites its facts by one of these, with the heading.
PUBLIC_SOURCE = re.compile(r"https://rocketmq\.apache\.org/\S+|https://github\.com/apache/rocketmq\S*")
# Pointers a student cannot follow: files outside the repository (the course's source texts and
# notes), and the issue tracker's section numbers.
PRIVATE_POINTER = re.compile(r"\b00[0-4]_[0-9a-f]{16}\.txt\b|shared/|reference/|reference\s§|Appendix\sA\b|"
                             r"\bissue \d+|\bseeds?\b \d{3}|\bseeds? 00[0-4]\b", re.IGNORECASE)
LAB_TIMEOUT_S = 600      # one cell; the labs' own budget (60 s a notebook) is a benchmark, not a limit here


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop widget state and widget outputs, join consecutive stream outputs, in place; returns `nb`."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for o in cell.outputs:
            if WIDGET_VIEW in o.get("data", {}):
                continue
            # One stream output per run of prints: how the kernel happened to batch them is noise.
            if outputs and o.output_type == "stream" and outputs[-1].output_type == "stream" \
                    and outputs[-1].name == o.name:
                outputs[-1].text += o.text
                continue
            outputs.append(o)
        cell.outputs = outputs
        cell.metadata.pop("execution", None)
    return nb


def problems(path: str) -> list[str]:
    """What keeps `path` from being a committable lab notebook: too big, widget state, no
    parameters cell with `seed` and `grading`, no learning objectives, no link to a public source, or
    a pointer to something outside the repository."""
    out = []
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        out.append(f"{size} bytes, over the {MAX_BYTES}-byte limit")
    nb = nbformat.read(path, as_version=4)
    if "widgets" in nb.metadata:
        out.append("metadata.widgets present (run `python -m rmqlab.lab.notebooks strip`)")
    widget_outputs = sum(WIDGET_VIEW in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    if widget_outputs:
        out.append(f"{widget_outputs} widget output(s) left")
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(params) != 1:
        out.append(f"{len(params)} cells tagged 'parameters' (need exactly one)")
    else:
        for name in ("seed", "grading"):
            if not any(line.split("=")[0].strip() == name for line in params[0].source.splitlines()):
                out.append(f"the parameters cell does not set {name!r}")
    first = nb.cells[0] if nb.cells else None
    if first is None or first.cell_type != "markdown" or "learning objectives" not in first.source.lower():
        out.append("the first cell is not markdown with 'Learning objectives'")
    if not any(c.cell_type == "markdown" and PUBLIC_SOURCE.search(c.source) for c in nb.cells):
        out.append("no link to a public source (RocketMQ's docs site or repository)")
    for i, cell in enumerate(nb.cells):
        # Outputs count where nbval compares them: the others depend on the machine (paths, pids).
        shown = cell.get("outputs", []) if "nbval-check-output" in cell.metadata.get("tags", []) else []
        texts = [cell.source] + [o.get("text", "") for o in shown] \
            + [o.get("data", {}).get(k, "") for o in shown for k in ("text/plain", "text/html", "text/markdown")]
        for text in texts:
            found = PRIVATE_POINTER.search(text if isinstance(text, str) else "".join(text))
            if found:
                out.append(f"cell {i} points to {found.group(0)!r}, which a student cannot open")
                break
    return out


def execute(path: str, timeout_s: int = LAB_TIMEOUT_S) -> float:
    """Run `path` top to bottom in a fresh kernel (cwd: its folder), strip it and save it in
    place; returns the wall seconds the run took. A failing cell raises CellExecutionError."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}})
    start = time.monotonic()
    client.execute()
    took = time.monotonic() - start
    nbformat.write(strip(nb), path)
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rmqlab.lab.notebooks", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("execute", "strip", "check"))
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    failed = False
    for path in args.paths:
        if args.command == "execute":
            took = execute(path)
            print(f"{path}: executed in {took:.1f} s, {os.path.getsize(path)} bytes")
        elif args.command == "strip":
            nbformat.write(strip(nbformat.read(path, as_version=4)), path)
        found = problems(path) if args.command != "strip" else []
        for p in found:
            print(f"{path}: {p}", file=sys.stderr)
        failed |= bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
