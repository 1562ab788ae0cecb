"""The `rmqlab` command line, mirroring RocketMQ's scripts (mqnamesrv, mqbroker, mqcontroller, mqproxy).

Every server subcommand takes RocketMQ's start-up flags: `-c FILE` (a .properties file, or
rmq-proxy.json for the proxy), `-n ADDR` (name server list, "a;b"), and `-p` (print the effective
configuration and exit, like RocketMQ's `-p`); without `-p` the server runs as this process.
`broker --enable-proxy` also runs a Proxy in the broker's process (Local mode; `-pc` names its
rmq-proxy.json).

`producer` and `consumer` are RocketMQ's benchmark clients (benchmark/producer.sh, consumer.sh; see
rmqlab.example.benchmark): a bad flag value exits with code 2 and a message naming the flag.
"""

from __future__ import annotations

import argparse
import sys

SERVER_COMMANDS = {
    "namesrv": "the NameServer (RocketMQ's mqnamesrv)",
    "broker": "a Broker (RocketMQ's mqbroker)",
    "controller": "a standalone Controller (RocketMQ's mqcontroller)",
    "proxy": "a Proxy in Cluster mode (RocketMQ's mqproxy)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rmqlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="headless walkthrough; prints what happened and writes an HTML report")
    demo.add_argument("--out", default="rmqlab-demo", help="directory for the store files and report.html")
    demo.add_argument("--seed", type=int, default=7, help="seed for the crash points and message contents")

    from rmqlab.lab import launcher

    lab = sub.add_parser("lab", help="open JupyterLab on the lab notebooks (labs/)", description=launcher.__doc__.split("\n\n")[0])
    launcher.add_arguments(lab)

    from rmqlab.workload import cli as workload_cli

    def described(name: str, help_text: str) -> argparse.ArgumentParser:
        # The help line, as a sentence, is the description (not the module's docstring, which is
        # written for the code's readers).
        return sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")

    record = described("record", "record a workload (cluster, clients, faults, seed) with its trace as Parquet")
    workload_cli.add_record_arguments(record)
    replay = described("replay", "re-run a recorded workload on the simulator and print its outcome")
    workload_cli.add_replay_arguments(replay)

    from rmqlab.chaos import cli as chaos_cli

    chaos = described("chaos", "run chaos campaigns (cases of faults, modes and configurations) on the simulator")
    chaos_cli.add_arguments(chaos)

    from rmqlab.grading import cli as grading_cli

    grade = described("grade", "grade a class's notebooks against (hidden) workloads with papermill and Spark")
    grading_cli.add_arguments(grade)

    from rmqlab.admin_cli import add_parser as add_admin_parser

    add_admin_parser(sub)

    from rmqlab.example.benchmark import consumer, producer

    for name, module, what in (("producer", producer, "RocketMQ's benchmark/producer.sh"),
                               ("consumer", consumer, "RocketMQ's benchmark/consumer.sh")):
        p = sub.add_parser(name, help=f"a benchmark {name} client process ({what})",
                           description=module.__doc__.split("\n\n")[0])
        module.add_arguments(p)
        p.set_defaults(subparser=p)  # for errors found after parsing, with this command's usage

    for name, what in SERVER_COMMANDS.items():
        p = sub.add_parser(name, help=f"start {what}", description=f"Start {what} as this process (with -p: print its configuration and exit).")
        p.add_argument("-c", "--configFile", dest="config_file", help="configuration file")
        p.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", help='name server address list, e.g. "127.0.0.1:9876;127.0.0.1:9877"')
        p.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true", help="print the effective configuration and exit")
        if name in ("proxy", "broker"):
            p.add_argument("-pc", "--proxyConfigPath", dest="proxy_config_path",
                           help="rmq-proxy.json" + (" (with --enable-proxy)" if name == "broker" else ""))
        if name == "broker":
            p.add_argument("--enable-proxy", dest="enable_proxy", action="store_true",
                           help="Local mode: run a Proxy in this broker's process (mqbroker --enable-proxy)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from rmqlab.demo import run_demo

        return run_demo(out_dir=args.out, seed=args.seed)
    if args.command == "lab":
        from rmqlab.lab import launcher

        return launcher.run(args)
    if args.command in ("record", "replay"):
        from rmqlab.workload.cli import run as run_workload_command

        return run_workload_command(args)
    if args.command == "chaos":
        from rmqlab.chaos.cli import run as run_chaos_command

        return run_chaos_command(args)
    if args.command == "grade":
        from rmqlab.grading.cli import run as run_grade

        return run_grade(args)
    if args.command == "admin":
        from rmqlab.admin_cli import run

        return run(args)
    if args.command in ("producer", "consumer"):
        from rmqlab.example.benchmark.process import build_client, run_client_command

        try:
            client, namesrv_addr = build_client(args.command, args)
        except ValueError as e:
            args.subparser.error(str(e))  # exit code 2, as argparse's own errors
        return run_client_command(args.command, client, namesrv_addr)
    from rmqlab.config.cli import run_component_command

    return run_component_command(args.command, args)


if __name__ == "__main__":
    sys.exit(main())
