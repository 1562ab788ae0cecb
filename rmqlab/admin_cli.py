"""`rmqlab admin <subcommand>`: the operator's tool, mirroring RocketMQ's mqadmin (issue 4 §5).

    rmqlab admin clusterList      -n 127.0.0.1:9876
    rmqlab admin topicRoute       -n 127.0.0.1:9876 -t TopicTest
    rmqlab admin updateTopic      -n 127.0.0.1:9876 (-b 127.0.0.1:10911 | -c DefaultCluster) -t TopicTest [-r 4 -w 4]
    rmqlab admin brokerStatus     -n 127.0.0.1:9876 -b 127.0.0.1:10911
    rmqlab admin consumerProgress -n 127.0.0.1:9876 -g GroupName [-t TopicTest]

It runs rmqlab's DefaultMQAdminExt on a real-runtime node in this process; output follows
mqadmin's columns. Exit code 1 with the broker's or name server's answer when a request fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile

SUBCOMMANDS = ("clusterList", "topicRoute", "updateTopic", "brokerStatus", "consumerProgress")


def add_parser(sub) -> None:
    p = sub.add_parser("admin", help="administration commands, like RocketMQ's mqadmin")
    p.add_argument("subcommand", choices=SUBCOMMANDS)
    p.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", required=True, help='"host:port;host:port"')
    p.add_argument("-t", "--topic")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr")
    p.add_argument("-c", "--clusterName", dest="cluster_name")
    p.add_argument("-g", "--consumerGroup", dest="group")
    p.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except Exception as e:  # a refused or failed request: say what the server answered
        print(f"rmqlab admin {args.subcommand}: {e}", file=sys.stderr)
        return 1


def _need(args: argparse.Namespace, *names: str) -> None:
    missing = [n for n in names if not getattr(args, n)]
    if missing:
        flags = {"topic": "-t", "broker_addr": "-b", "cluster_name": "-c", "group": "-g"}
        raise ValueError(f"missing {', '.join(flags[n] for n in missing)}")


async def _run(args: argparse.Namespace) -> int:
    from rmqlab.client import ClientProcess, DefaultMQAdminExt
    from rmqlab.runtime.real import RealNode

    node = RealNode("admin", tempfile.mkdtemp(prefix="rmqlab-admin-"))
    admin = DefaultMQAdminExt(args.namesrv_addr)
    process = ClientProcess(admin=admin)
    await process.start(node)
    try:
        return await COMMANDS[args.subcommand](admin, args)
    finally:
        await process.shutdown()
        await node.close()


async def _cluster_list(admin, args) -> int:
    info = await admin.examine_broker_cluster_info()
    print(f"{'#Cluster Name':<22}{'#Broker Name':<22}{'#BID':<6}{'#Addr':<24}")
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            for bid, addr in sorted((data.broker_addrs if data else {}).items()):
                print(f"{cluster:<22}{name:<22}{bid:<6}{addr:<24}")
    return 0


async def _topic_route(admin, args) -> int:
    _need(args, "topic")
    route = await admin.examine_topic_route_info(args.topic)
    print(route.encode().decode())
    return 0


async def _update_topic(admin, args) -> int:
    from rmqlab.broker.topic.topic_config import TopicConfig

    _need(args, "topic")
    config = TopicConfig(topic_name=args.topic, read_queue_nums=args.read_queue_nums,
                         write_queue_nums=args.write_queue_nums)
    if args.broker_addr:
        await admin.create_and_update_topic_config(args.broker_addr, config)
        print(f"create topic to {args.broker_addr} success.")
    elif args.cluster_name:
        for addr in await admin.create_and_update_topic_config_by_cluster(args.cluster_name, config):
            print(f"create topic to {addr} success.")
    else:
        raise ValueError("missing -b or -c")
    print(json.dumps(config.to_json_dict(), sort_keys=True))
    return 0


async def _broker_status(admin, args) -> int:
    _need(args, "broker_addr")
    stats = await admin.fetch_broker_runtime_stats(args.broker_addr)
    for key in sorted(stats.table):
        print(f"{key:<45}: {stats.table[key]}")
    return 0


async def _consumer_progress(admin, args) -> int:
    _need(args, "group")
    stats = await admin.examine_consume_stats(args.group, args.topic)
    print(f"{'#Topic':<32}{'#Broker Name':<22}{'#QID':<6}{'#Broker Offset':<16}{'#Consumer Offset':<18}{'#Diff':<8}")
    for mq, w in sorted(stats.offset_table.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name, kv[0].queue_id)):
        print(f"{mq.topic:<32}{mq.broker_name:<22}{mq.queue_id:<6}{w.broker_offset:<16}{w.consumer_offset:<18}"
              f"{w.broker_offset - w.consumer_offset:<8}")
    print(f"\nDiff Total: {stats.compute_total_diff()}")
    return 0


COMMANDS = {"clusterList": _cluster_list, "topicRoute": _topic_route, "updateTopic": _update_topic,
            "brokerStatus": _broker_status, "consumerProgress": _consumer_progress}
