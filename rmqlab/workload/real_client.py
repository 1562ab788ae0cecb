"""A workload's client as an OS process (runtime="real"): `rmqlab producer|consumer`
with the workload's client_overrides (ClientConfig settings such as pollNameServerInterval, which
the benchmark clients have no flag for) set before the client starts.

    python -m rmqlab.workload.real_client --client-overrides '{"pollNameServerInterval": 1000}' \\
        producer -n 127.0.0.1:9876 -t WorkloadTopic ...
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = {}
    if argv[:1] == ["--client-overrides"]:
        overrides = json.loads(argv[1])
        argv = argv[2:]
    from rmqlab.cli import build_parser
    from rmqlab.example.benchmark.process import build_client, run_client_command
    from rmqlab.workload.runner import apply_client_overrides
    from rmqlab.workload.spec import CLIENT_SETTINGS

    unknown = sorted(set(overrides) - set(CLIENT_SETTINGS))
    if unknown:
        raise SystemExit(f"--client-overrides: unknown setting(s) {', '.join(unknown)}")
    args = build_parser().parse_args(argv)
    if args.command not in ("producer", "consumer"):
        raise SystemExit(f"expected producer or consumer, not {args.command!r}")
    try:
        client, address = build_client(args.command, args)
    except ValueError as e:
        args.subparser.error(str(e))
    apply_client_overrides(client, overrides)
    return run_client_command(args.command, client, address)


if __name__ == "__main__":
    sys.exit(main())
