"""A deployment mode is data that both backends run (rmqlab.cluster: modes, deployment, backend).

MODE below is a mode rmqlab does not ship — one master and its synchronous slave, registered with
two name servers, every broker in a cluster "LabCluster" — defined here as a DeploymentMode and
nothing else: no backend changes for it. It runs on the simulator (seeded), and the real backend
writes its processes' configuration files from it (starting them costs ~25 s of this machine's
two cores: tests/test_controller_modes_real.py and others start the shipped modes).
"""

from __future__ import annotations

import inspect
import os
import tempfile

import pytest

from rmqlab.cluster import MODES, Cluster, DeploymentMode
from rmqlab.trace import client_ops

MODE = DeploymentMode(
    "1m-1s-sync-2ns",
    brokers={"broker-a": "2m-2s-sync/broker-a.properties", "broker-a-s": "2m-2s-sync/broker-a-s.properties"},
    namesrvs={"namesrv-0": None, "namesrv-1": None},
    broker_settings={"*": {"brokerClusterName": "LabCluster"}})
TOPIC = "TopicTest"
N = 20


def sent_ok(events, node: str = "producer") -> int:
    return sum(1 for op in client_ops(events) if op.node == node and op.f == "send" and op.type == "ok")


def slave_reported(events, slave: str = "broker-a-s") -> bool:
    """The slave's HA client reported its offset to the master."""
    return any(e.node == slave and e.kind == "frame.send" and e.fields.get("proto") == "ha"
               and e.fields.get("name") == "report" for e in events)


def test_a_mode_defined_in_a_test_runs_on_the_simulator_backend(tmp_path):
    with Cluster(MODE, seed=3, root_dir=str(tmp_path)) as c:
        assert c.mode == "1m-1s-sync-2ns"
        assert list(c.namesrvs) == ["namesrv-0", "namesrv-1"] and list(c.brokers) == ["broker-a", "broker-a-s"]
        assert c.namesrv_addr == "127.0.0.1:9876;127.0.0.1:9886"  # name server i at 9876 + 10 i
        c.add_producer("producer", topic=TOPIC, count=N, interval_ms=10, start=False)
        c.start()
        assert c.registered() == 2  # by each of the two name servers
        for ns in c.namesrvs:
            table = c.components[ns].route_info_manager.broker_addr_table["broker-a"]
            assert sorted(table.broker_addrs) == [0, 1]
        assert {c.components[b].broker_config.brokerClusterName for b in c.brokers} == {"LabCluster"}
        c.create_topic(TOPIC)  # `updateTopic -c LabCluster`: the mode's setting, read from the templates
        c.run_until(lambda: slave_reported(c.events()), 10_000)  # SYNC_MASTER acks once its slave is in
        c.start_client("producer")
        c.run_until(lambda: sent_ok(c.events()) == N, 20_000)
        offsets = lambda: {c.components[b].message_store.get_max_phy_offset() for b in c.brokers}  # noqa: E731
        c.run_until(lambda: len(offsets()) == 1, 5_000)  # the slave replicates the master
        assert offsets() != {0}


def test_the_same_mode_is_written_for_the_real_backend(tmp_path):
    """The real backend writes each node's file from the same description: free ports, both name
    servers for every broker, the mode's setting; nothing is started."""
    with Cluster(MODE, "real", root_dir=str(tmp_path)) as c:
        assert list(c.real.nodes) == ["namesrv-0", "namesrv-1", "broker-a", "broker-a-s"]
        assert len(c.namesrv_addr.split(";")) == 2 and "9876" not in c.namesrv_addr
        conf = dict(line.split("=", 1) for line in
                    (tmp_path / "conf" / "broker-a-s.properties").read_text().splitlines())
        assert conf["brokerClusterName"] == "LabCluster" and conf["brokerRole"] == "SLAVE"
        assert conf["namesrvAddr"] == c.namesrv_addr
        assert conf["storePathRootDir"] == c.store_dir("broker-a-s")
        assert (tmp_path / "conf" / "namesrv-1.conf").read_text().startswith("listenPort=")


def test_a_mode_is_checked_when_it_is_described():
    with pytest.raises(ValueError, match="embedded controllers are the name servers"):
        DeploymentMode("x", {"broker-a": "broker.conf"}, namesrvs={"ns": None}, controllers="embedded")
    with pytest.raises(ValueError, match="nodes it does not have: broker-b"):
        DeploymentMode("x", {"broker-a": "broker.conf"}, broker_settings={"broker-b": {"brokerId": 1}})
    with pytest.raises(ValueError, match="controllers must be None"):
        DeploymentMode("x", {"broker-a": "broker.conf"}, controllers="inside")


def test_a_workload_names_the_nodes_the_cluster_builds():
    """rmqlab.workload.spec.server_nodes reads the mode's own node list (no second copy of the
    naming rules): the same names, in the same order, as a built Cluster's."""
    from rmqlab.workload.spec import server_nodes

    for name, mode in MODES.items():
        for proxy in (None, "cluster"):
            for controllers in ((1, 5) if mode.controllers else (3,)):
                with Cluster(name, controllers=controllers, proxy=proxy) as c:
                    built = list(c.sim.nodes)
                assert server_nodes(name, controllers if mode.controllers else None, proxy) == built


def test_cluster_and_backends_do_not_branch_on_the_runtime_or_the_mode():
    """Cluster leaves what differs between runtimes to its backend, and a backend knows roles,
    not modes: adding a mode is a DeploymentMode, not an edit of a backend."""
    import rmqlab.cluster.backend as backend
    import rmqlab.cluster.cluster as cluster
    import rmqlab.cluster.deployment as deployment
    import rmqlab.cluster.real_backend as real_backend
    import rmqlab.cluster.sim_backend as sim_backend

    source = inspect.getsource(cluster)
    assert "runtime ==" not in source and "runtime !=" not in source
    for module in (backend, deployment, sim_backend, real_backend):
        text = inspect.getsource(module)
        named = [m for m in MODES if m in text]
        assert not named, f"{os.path.basename(module.__file__)} names modes {named}"


def test_a_simulated_cluster_makes_its_own_root_in_memory(monkeypatch, tmp_path):
    """Without root_dir a simulated cluster's store files go to memory (sim_backend.memory_dir:
    /dev/shm with room to spare), where no flush waits for a disk; the real runtime's stay on disk."""
    import rmqlab.cluster.sim_backend as sim_backend

    memory = tmp_path / "shm"
    memory.mkdir()
    monkeypatch.setattr(sim_backend, "memory_dir", lambda: str(memory))
    with Cluster("single-master") as c:
        assert os.path.dirname(c.root_dir) == str(memory)
        c.start()
        assert os.path.isfile(os.path.join(c.store_dir("broker-a"), "checkpoint"))  # the broker store is there
    assert os.listdir(memory) == []
    with Cluster("single-master", "real") as c:
        assert os.path.dirname(c.root_dir) != str(memory)


def test_without_room_in_memory_a_simulated_cluster_uses_the_temporary_directory(monkeypatch, tmp_path):
    import rmqlab.cluster.sim_backend as sim_backend

    monkeypatch.setattr(sim_backend, "memory_dir", lambda: None)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with Cluster("single-master") as c:
        assert os.path.dirname(c.root_dir) == str(tmp_path)
    assert os.listdir(tmp_path) == []
