"""``python -m rmqlab.trace``: small tools for trace files.

* ``catalog`` prints the event-kind catalog as the Markdown embedded in datasets/README.md
  (between its ``<!-- trace-kinds:begin -->`` and ``<!-- trace-kinds:end -->`` markers);
* ``hash FILE...`` prints `trace_hash` of each JSONL or Parquet trace, to compare runs from a shell.
"""

from __future__ import annotations

import argparse
import sys

from rmqlab.trace.jsonl import read_jsonl, trace_hash
from rmqlab.trace.kinds import catalog_markdown
from rmqlab.trace.parquet import read_parquet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rmqlab.trace", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("catalog", help="print the event-kind catalog (Markdown)")
    hash_parser = commands.add_parser("hash", help="print the trace hash of each file")
    hash_parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "catalog":
        sys.stdout.write(catalog_markdown())
        return 0
    for path in args.files:
        events = read_parquet(path) if path.endswith(".parquet") else read_jsonl(path)
        print(f"{trace_hash(events)}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
