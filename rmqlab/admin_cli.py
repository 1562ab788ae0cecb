"""`rmqlab admin <subcommand>`: the operator's tool, mirroring RocketMQ's mqadmin.

    rmqlab admin clusterList      -n 127.0.0.1:9876
    rmqlab admin topicRoute       -n 127.0.0.1:9876 -t TopicTest
    rmqlab admin updateTopic      -n 127.0.0.1:9876 (-b 127.0.0.1:10911 | -c DefaultCluster) -t TopicTest [-r 4 -w 4]
    rmqlab admin brokerStatus     -n 127.0.0.1:9876 (-b 127.0.0.1:10911 | -c DefaultCluster)
    rmqlab admin consumerProgress -n 127.0.0.1:9876 -g GroupName [-t TopicTest]
    rmqlab admin getBrokerConfig    -n 127.0.0.1:9876 -b 127.0.0.1:10911
    rmqlab admin updateBrokerConfig -n 127.0.0.1:9876 -b 127.0.0.1:10911 -k brokerPermission -v 4
    rmqlab admin deleteExpiredCommitLog -n 127.0.0.1:9876 [-b 127.0.0.1:10911 | -c DefaultCluster]

topicRoute prints the route exactly as the name server answers it: with supportActingMaster, a
group whose master is down shows its smallest-id slave as brokerId 0 and its queues read-only
(perm 4), RIP-32's acting master. getBrokerConfig prints every setting as mqadmin does
("%-50s=  %s") but sorted by key (mqadmin prints a Properties' hash order); updateBrokerConfig sets
one key on a running broker: what RocketMQ lets it change, except that an unknown key or a
malformed value is refused (exit 1, naming the key) where RocketMQ ignores it.
deleteExpiredCommitLog asks one broker (-b), or every broker of a cluster (-c; of every cluster
without either), to run its next 20 commitlog-expiry passes whatever deleteWhen says; it prints
"success" or "false" (the last broker's answer) without a newline, as mqadmin's
DeleteExpiredCommitLogSubCommand does.

Controller mode (RocketMQ's tools/command/controller, ha/GetSyncStateSetSubCommand and
broker/GetBrokerEpochSubCommand; `-a` takes one controller or a list "a;b;c"):

    rmqlab admin getControllerMetaData -a 127.0.0.1:9878
    rmqlab admin getSyncStateSet       -a 127.0.0.1:9878 (-b broker-a | -c DefaultCluster -n 127.0.0.1:9876) [-i 3]
    rmqlab admin getBrokerEpoch        -n 127.0.0.1:9876 (-b broker-a | -c DefaultCluster) [-i 3]
    rmqlab admin electMaster           -a 127.0.0.1:9878 -c DefaultCluster -bn broker-a -b 2
    rmqlab admin cleanBrokerMetadata   -a 127.0.0.1:9878 -bn broker-a [-b "1;2"] (-c DefaultCluster | -l)

Without `-n`, the name servers come from $NAMESRV_ADDR, as for mqadmin and the clients.
It runs rmqlab's DefaultMQAdminExt on a real-runtime node in this process; output follows
mqadmin's columns and lines. Exit code 1 with the server's answer (or why no server answered) when
a request fails; 2 for a missing or malformed option (argparse). `-i N` repeats the command every
N seconds until interrupted, as mqadmin's does.

Deviations from mqadmin, for an operator who needs to see what went wrong:

* getControllerMetaData prints one block per controller listed in `-a`, each headed by
  `#ControllerAddress` and with `#IsLeader` (mqadmin asks one address and prints neither); it
  exits 1 if any listed controller did not answer, after printing the others.
* getSyncStateSet and getBrokerEpoch fail (exit 1, naming it) on a broker set the controller or
  the name server does not know; mqadmin prints nothing for it.
* electMaster lists the set's members (mqadmin misreads the answer's body and lists none).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile

NAMESRV_ADDR_ENV = "NAMESRV_ADDR"  # what mqadmin reads when -n is not given
SUBCOMMANDS = ("clusterList", "topicRoute", "updateTopic", "brokerStatus", "consumerProgress",
               "getBrokerConfig", "updateBrokerConfig", "deleteExpiredCommitLog",
               "getControllerMetaData", "getSyncStateSet", "getBrokerEpoch", "electMaster", "cleanBrokerMetadata")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 second, got {value}")
    return value


def _broker_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a broker id (an integer), got {text!r}") from None


def add_parser(sub) -> None:
    p = sub.add_parser("admin", help="administration commands, like RocketMQ's mqadmin")
    cmds = p.add_subparsers(dest="subcommand", required=True, metavar="subcommand")

    def command(name: str, help_text: str, namesrv_required: bool = True) -> argparse.ArgumentParser:
        c = cmds.add_parser(name, help=help_text, description=help_text)
        # Not required by argparse: $NAMESRV_ADDR stands in for -n, as for mqadmin (run checks).
        c.add_argument("-n", "--namesrvAddr", dest="namesrv_addr",
                       help='name server address list, "host:port;host:port" (default: $NAMESRV_ADDR)')
        c.set_defaults(namesrv_required=namesrv_required, subparser=c)
        return c

    command("clusterList", "list the clusters, broker groups and their members")
    c = command("topicRoute", "print a topic's route")
    c.add_argument("-t", "--topic")
    c = command("updateTopic", "create or update a topic on a broker or every master of a cluster")
    c.add_argument("-b", "--brokerAddr", dest="broker_addr")
    c.add_argument("-c", "--clusterName", dest="cluster_name")
    c.add_argument("-t", "--topic")
    c.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    c.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)
    c = command("brokerStatus", "print a broker's runtime information, or every master's and slave's of a cluster")
    c.add_argument("-b", "--brokerAddr", dest="broker_addr")
    c.add_argument("-c", "--clusterName", dest="cluster_name")
    c = command("consumerProgress", "print a consumer group's progress per queue")
    c.add_argument("-g", "--consumerGroup", dest="group")
    c.add_argument("-t", "--topic")
    c = command("getBrokerConfig", "print a broker's settings")
    c.add_argument("-b", "--brokerAddr", dest="broker_addr")
    c = command("updateBrokerConfig", "change one setting of a running broker")
    c.add_argument("-b", "--brokerAddr", dest="broker_addr")
    c.add_argument("-k", "--key", dest="key", required=True)
    c.add_argument("-v", "--value", dest="value", required=True)
    c = command("deleteExpiredCommitLog", "Delete expired CommitLog files.")
    c.add_argument("-b", "--brokerAddr", dest="broker_addr")
    c.add_argument("-c", "--cluster", dest="cluster_name")

    c = command("getControllerMetaData", "get the controller group's metadata", namesrv_required=False)
    c.add_argument("-a", "--controllerAddress", dest="controller_address", required=True,
                   help='a controller address, or a list "a;b;c"')
    c = command("getSyncStateSet", "fetch the SyncStateSet of broker sets (-n is needed with -c)",
                namesrv_required=False)
    c.add_argument("-a", "--controllerAddress", dest="controller_address", required=True,
                   help='a controller address, or a list "a;b;c"')
    c.add_argument("-b", "--brokerName", dest="broker_name", help="which broker set to fetch")
    c.add_argument("-c", "--clusterName", dest="cluster_name", help="every broker set of this cluster")
    c.add_argument("-i", "--interval", dest="interval", type=_positive_int, help="repeat every N seconds")
    c = command("getBrokerEpoch", "fetch the epoch entries of brokers")
    c.add_argument("-b", "--brokerName", dest="broker_name", help="every member of this broker set")
    c.add_argument("-c", "--clusterName", dest="cluster_name", help="every member of this cluster")
    c.add_argument("-i", "--interval", dest="interval", type=_positive_int, help="repeat every N seconds")
    c = command("electMaster", "re-elect the specified broker as master", namesrv_required=False)
    c.add_argument("-a", "--controllerAddress", dest="controller_address", required=True,
                   help='a controller address, or a list "a;b;c"')
    c.add_argument("-b", "--brokerId", dest="broker_id", type=_broker_id, required=True,
                   help="the controller id of the broker to make master")
    c.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
    c.add_argument("-c", "--clusterName", dest="cluster_name", required=True)
    c = command("cleanBrokerMetadata", "clean the metadata of brokers on the controller", namesrv_required=False)
    c.add_argument("-a", "--controllerAddress", dest="controller_address", required=True,
                   help='a controller address, or a list "a;b;c"')
    c.add_argument("-b", "--brokerControllerIdsToClean", dest="broker_ids",
                   help='the controller ids to clean, e.g. "1;2;3"; none: the whole broker set')
    c.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
    c.add_argument("-c", "--clusterName", dest="cluster_name", help="required unless -l")
    c.add_argument("-l", "--cleanLivingBroker", dest="clean_living_broker", action="store_true",
                   help="clean living brokers too")


def _namesrv_addr(args: argparse.Namespace) -> str | None:
    """-n, else $NAMESRV_ADDR (mqadmin reads it too); a usage error (exit 2) if the command needs
    one and neither is given, or if the address list is malformed."""
    from rmqlab.config.addresses import check_addr_list

    addr, where = args.namesrv_addr, "-n/--namesrvAddr"
    if addr is None:
        addr, where = os.environ.get(NAMESRV_ADDR_ENV) or None, f"${NAMESRV_ADDR_ENV}"
    parser = getattr(args, "subparser", None)
    if addr is None:
        if getattr(args, "namesrv_required", False) and parser is not None:
            parser.error(f"the following arguments are required: -n/--namesrvAddr (or set ${NAMESRV_ADDR_ENV})")
        return None
    expected = check_addr_list(addr)
    if expected is not None and parser is not None:
        parser.error(f"{where} {addr!r}: expected {expected}")
    return addr


def run(args: argparse.Namespace) -> int:
    args.namesrv_addr = _namesrv_addr(args)
    # The client library logs what it meets (an unreachable name server, ...) and, with no handler
    # configured, Python prints its warnings on stderr: the cause would appear twice, once from the
    # library and once below. mqadmin logs to a file; here the one line below says it.
    quiet = logging.NullHandler()
    library_log = logging.getLogger("rmqlab")
    library_log.addHandler(quiet)
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:  # how an -i loop ends
        return 130
    except Exception as e:  # a refused or failed request: say what the server answered
        print(f"rmqlab admin {args.subcommand}: {explain(e, args)}", file=sys.stderr)
        return 1
    finally:
        library_log.removeHandler(quiet)


def explain(e: Exception, args: argparse.Namespace) -> str:
    """What failed, with a hint for the controller's refusals that an operator meets most."""
    from rmqlab.client.exceptions import MQBrokerException
    from rmqlab.remoting.exceptions import RemotingConnectError
    from rmqlab.remoting.response_code import ResponseCode

    if isinstance(e, RemotingConnectError):
        return f"cannot reach {e.addr}: {e.reason}"
    if isinstance(e, MQBrokerException):
        name = getattr(args, "broker_name", None)
        if e.response_code == ResponseCode.CONTROLLER_NOT_LEADER:
            return f"{e} (the controller named as leader is not serving as leader yet; retry)"
        if e.response_code in (ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST) and name:
            return f"{e} (broker set {name} is not known to the controller)"
    return str(e)


def _need(args: argparse.Namespace, *names: str) -> None:
    missing = [n for n in names if not getattr(args, n)]
    if missing:
        flags = {"topic": "-t", "broker_addr": "-b", "cluster_name": "-c", "group": "-g", "key": "-k"}
        raise ValueError(f"missing {', '.join(flags[n] for n in missing)}")


async def _run(args: argparse.Namespace) -> int:
    from rmqlab.client import ClientProcess, DefaultMQAdminExt
    from rmqlab.runtime.real import RealNode

    # The node's store directory holds nothing for an admin tool: a temporary one, removed on
    # the way out (an exception, or Ctrl-C: asyncio.run cancels this task and the with unwinds).
    with tempfile.TemporaryDirectory(prefix="rmqlab-admin-") as store_dir:
        node = RealNode("admin", store_dir)
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
    from rmqlab.common.topic_config import TopicConfig

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
    if args.broker_addr:
        stats = await admin.fetch_broker_runtime_stats(args.broker_addr)
        for key in sorted(stats.table):
            print(f"{key:<45}: {stats.table[key]}")
        return 0
    if not args.cluster_name:
        raise ValueError("missing -b or -c")
    # mqadmin's -c (CommandUtil.fetchMasterAndSlaveAddrByClusterName): every broker of the cluster,
    # each line led by its address, e.g. to compare the commitLogMaxOffset of a group's members.
    info = await admin.examine_broker_cluster_info()
    names = info.cluster_addr_table.get(args.cluster_name.strip())
    if not names:
        raise ValueError(f"cluster {args.cluster_name} not found on the name server ({args.namesrv_addr})")
    addrs = sorted({a for n in names if n in info.broker_addr_table for a in info.broker_addr_table[n].broker_addrs.values()})
    for addr in addrs:
        stats = await admin.fetch_broker_runtime_stats(addr)
        for key in sorted(stats.table):
            print(f"{addr:<24} {key:<32}: {stats.table[key]}")
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


async def _get_broker_config(admin, args) -> int:
    _need(args, "broker_addr")
    properties = await admin.get_broker_config(args.broker_addr)
    print(f"============{args.broker_addr}============")
    if not properties:
        print(f"Broker[{args.broker_addr}] has no config property!")
        return 0
    for key in sorted(properties):
        print(f"{key:<50}=  {properties[key]}")
    print()
    return 0


async def _update_broker_config(admin, args) -> int:
    _need(args, "broker_addr", "key")
    await admin.update_broker_config(args.broker_addr, {args.key.strip(): args.value.strip()})
    print(f"update broker config success, {args.broker_addr}")
    return 0


async def _delete_expired_commit_log(admin, args) -> int:
    if args.broker_addr:
        result = await admin.delete_expired_commit_log_by_addr(args.broker_addr.strip())
    else:
        result = await admin.delete_expired_commit_log(args.cluster_name.strip() if args.cluster_name else None)
    print("success" if result else "false", end="")
    return 0


# -- controller mode ---------------------------------------------------------------------------------
def _java(value) -> str:
    """A value as Java's string conversion writes it (null, true/false)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def _repeat(admin, args, once) -> int:
    """``once`` now, or with ``-i N`` every N seconds until interrupted (mqadmin's loop)."""
    if not args.interval:
        return await once()
    while True:
        await once()
        await admin.client_factory.node.sleep(args.interval * 1000)


async def _cluster_broker_names(admin, args, info=None) -> list[str]:
    """CommandUtil.fetchBrokerNameByClusterName: the broker sets of ``-c``, from the name server."""
    if not args.namesrv_addr:
        raise ValueError(f"-c {args.cluster_name}: missing -n, the name server that lists the cluster's broker sets")
    info = info or await admin.examine_broker_cluster_info()
    names = info.cluster_addr_table.get(args.cluster_name)
    if not names:
        raise ValueError(f"cluster {args.cluster_name} not found on the name server ({args.namesrv_addr})")
    return sorted(names)


async def _get_controller_meta_data(admin, args) -> int:
    from rmqlab.client.impl.mq_client_api_impl import controller_address_list

    failed = []
    for addr in controller_address_list(args.controller_address):
        try:
            meta = await admin.get_controller_meta_data(addr)
        except Exception as e:
            text = explain(e, args)
            print(f"rmqlab admin getControllerMetaData: {text if addr in text else f'{addr}: {text}'}",
                  file=sys.stderr)
            failed.append(addr)
            continue
        print(f"\n#ControllerAddress\t{addr}")
        print(f"#ControllerGroup\t{_java(meta.group)}")
        print(f"#ControllerLeaderId\t{_java(meta.controller_leader_id)}")
        print(f"#ControllerLeaderAddress\t{_java(meta.controller_leader_address)}")
        print(f"#IsLeader\t{_java(meta.is_leader)}")
        for peer in (meta.peers or "").split(";"):
            if peer:
                print(f"#Peer:\t{peer}")
    return 1 if failed else 0


def _replica(r) -> str:
    """BrokerReplicasInfo.ReplicaIdentity.toString."""
    return (f"ReplicaIdentity{{brokerName='{_java(r.broker_name)}', brokerId={_java(r.broker_id)}, "
            f"brokerAddress='{_java(r.broker_address)}', alive={_java(r.alive)}}}")


async def _get_sync_state_set(admin, args) -> int:
    if args.broker_name:
        names = [args.broker_name.strip()]
    elif args.cluster_name:
        names = await _cluster_broker_names(admin, args)
    else:
        raise ValueError("missing -b or -c")

    async def once() -> int:
        info = await admin.get_in_sync_state_data(args.controller_address, names)
        for name, ri in info.replicas_info_table.items():
            print(f"\n#brokerName\t{name}\n#MasterBrokerId\t{_java(ri.master_broker_id)}\n"
                  f"#MasterAddr\t{_java(ri.master_address)}\n#MasterEpoch\t{ri.master_epoch}\n"
                  f"#SyncStateSetEpoch\t{ri.sync_state_set_epoch}\n#SyncStateSetNums\t{len(ri.in_sync_replicas)}")
            for r in ri.in_sync_replicas:
                print(f"\nInSyncReplica:\t{_replica(r)}")
            for r in ri.not_in_sync_replicas:
                print(f"\nNotInSyncReplica:\t{_replica(r)}")
        unknown = [n for n in names if n not in info.replicas_info_table]
        if unknown:
            raise ValueError(f"broker set {', '.join(unknown)} is not known to the controller")
        return 0

    return await _repeat(admin, args, once)


async def _get_broker_epoch(admin, args) -> int:
    if args.broker_name:
        info = await admin.examine_broker_cluster_info()
        data = info.broker_addr_table.get(args.broker_name.strip())
        if data is None or not data.broker_addrs:
            raise ValueError(f"broker set {args.broker_name} not found on the name server ({args.namesrv_addr})")
        addrs = sorted(set(data.broker_addrs.values()))
    elif args.cluster_name:
        info = await admin.examine_broker_cluster_info()
        addrs = sorted({addr for name in await _cluster_broker_names(admin, args, info)
                        for addr in (info.broker_addr_table[name].broker_addrs.values()
                                     if name in info.broker_addr_table else ())})
    else:
        raise ValueError("missing -b or -c")

    async def once() -> int:
        for addr in addrs:
            cache = await admin.get_broker_epoch_cache(addr)
            print(f"\n#clusterName\t{_java(cache.cluster_name)}\n#brokerName\t{_java(cache.broker_name)}\n"
                  f"#brokerAddr\t{addr}\n#brokerId\t{cache.broker_id}")
            for i, entry in enumerate(cache.epoch_list):
                # As mqadmin: the last (open) epoch ends at the broker's max offset.
                end = cache.max_offset if i == len(cache.epoch_list) - 1 else entry.end_offset
                print(f"#Epoch: EpochEntry{{epoch={entry.epoch}, startOffset={entry.start_offset}, endOffset={end}}}")
        return 0

    return await _repeat(admin, args, once)


async def _elect_master(admin, args) -> int:
    cluster, name = args.cluster_name.strip(), args.broker_name.strip()
    header, members = await admin.elect_master(args.controller_address, cluster, name, args.broker_id)
    print(f"\n#ClusterName\t{cluster}\n#BrokerName\t{name}\n#BrokerMasterAddr\t{_java(header.master_address)}\n"
          f"#MasterEpoch\t{_java(header.master_epoch)}\n#SyncStateSetEpoch\t{_java(header.sync_state_set_epoch)}")
    if members is not None:
        for broker_id, addr in sorted(members.broker_addrs.items()):
            print(f"\t#Broker\t{broker_id}\t{addr}")
    return 0


async def _clean_broker_metadata(admin, args) -> int:
    name = args.broker_name.strip()
    cluster = args.cluster_name.strip() if args.cluster_name else None
    await admin.clean_controller_broker_data(args.controller_address, cluster, name, args.broker_ids,
                                             args.clean_living_broker)
    print(f"clear broker {name} metadata from controller success! ")
    return 0


COMMANDS = {"clusterList": _cluster_list, "topicRoute": _topic_route, "updateTopic": _update_topic,
            "brokerStatus": _broker_status, "consumerProgress": _consumer_progress,
            "getBrokerConfig": _get_broker_config, "updateBrokerConfig": _update_broker_config,
            "deleteExpiredCommitLog": _delete_expired_commit_log,
            "getControllerMetaData": _get_controller_meta_data, "getSyncStateSet": _get_sync_state_set,
            "getBrokerEpoch": _get_broker_epoch, "electMaster": _elect_master,
            "cleanBrokerMetadata": _clean_broker_metadata}
