"""BrokerController.start runs in named steps, as BrokerController.java's initialize() and start() do
(initializeMetadata, initializeRemotingServer + registerProcessor, initializeMessageStore,
startBasicService, initializeBrokerScheduledTasks, ...). The order is rmqlab's (the recorded workloads
replay it byte for byte: tests/test_workload.py); these tests pin the steps and what each leaves done."""

from __future__ import annotations

import os

from rmqlab.broker import BrokerController
from rmqlab.config import load_broker_config
from rmqlab.runtime.sim import Simulation

STEPS = ["initialize_metadata", "initialize_resources", "initialize_remoting_server", "initialize_message_store",
         "start_message_store", "start_ha_service", "start_basic_service", "initialize_broker_scheduled_tasks"]


class RecordingBroker(BrokerController):
    """Records each step as it ends, with what the broker holds at that moment."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps: list[tuple[str, dict]] = []
        self.listening_when_processors_registered: bool | None = None

    def _seen(self, step: str) -> None:
        self.steps.append((step, {"store": self.message_store is not None, "ha": self.ha_service is not None,
                                  "server": self.remoting_server is not None, "timers": sorted(self._timers)}))

    def register_processor(self, server) -> None:
        try:
            self.listening_when_processors_registered = server.port > 0
        except RuntimeError:   # "RemotingServer is not started"
            self.listening_when_processors_registered = False
        super().register_processor(server)


for _name in STEPS:
    def _wrap(name=_name):
        base = getattr(BrokerController, name)
        if name in ("initialize_remoting_server", "start_ha_service"):
            async def step(self):
                await base(self)
                self._seen(name)
        else:
            def step(self):
                base(self)
                self._seen(name)
        step.__name__ = name
        return step
    setattr(RecordingBroker, _name, _wrap())


def start_broker(tmp: str, **overrides) -> RecordingBroker:
    sim = Simulation(seed=1)
    props = {"brokerName": "broker-a", "listenPort": 10911, "storePathRootDir": os.path.join(tmp, "store"),
             "mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 20 * 100, **overrides}
    cfg = load_broker_config(None, overrides={k: str(v) for k, v in props.items()})
    sim.add_node("broker-a", lambda: RecordingBroker(cfg))
    sim.start_all()
    return sim.components["broker-a"]


def test_start_runs_the_steps_in_order(tmp_path):
    broker = start_broker(str(tmp_path))
    assert [name for name, _ in broker.steps] == STEPS
    held = dict(broker.steps)
    # initialize(): the store is built after the server binds, the HA service after the store
    assert held["initialize_metadata"] == {"store": False, "ha": False, "server": False, "timers": []}
    assert held["initialize_remoting_server"]["server"] and not held["initialize_remoting_server"]["store"]
    assert held["initialize_message_store"]["store"] and not held["initialize_message_store"]["ha"]
    assert held["initialize_message_store"]["timers"] == []
    # start(): the store's services first, then the broker's own scheduled tasks
    assert "TimerFlushService" in held["start_message_store"]["timers"]
    assert held["start_ha_service"]["ha"]
    assert {"PopReviveService", "QueueLockManager", "ConsumerOrderInfoPersist"} <= \
        set(held["start_basic_service"]["timers"])
    assert "ConsumerOffsetPersist" not in held["start_basic_service"]["timers"]
    assert {"ConsumerOffsetPersist", "DelayOffsetPersist"} <= set(held["initialize_broker_scheduled_tasks"]["timers"])
    assert "RegisterBrokerAll" not in held["initialize_broker_scheduled_tasks"]["timers"]
    assert "RegisterBrokerAll" in broker._timers   # start() itself, after the steps
    assert broker.listening_when_processors_registered is False   # registerProcessor before the bind


def test_a_slave_schedules_slave_synchronize_in_the_broker_scheduled_tasks(tmp_path):
    broker = start_broker(str(tmp_path), brokerId=1, brokerRole="SLAVE", timerWheelEnable="false")
    held = dict(broker.steps)
    assert "SlaveSynchronize" in held["initialize_broker_scheduled_tasks"]["timers"]
    assert "TimerFlushService" not in held["start_message_store"]["timers"]
    assert broker.timer_message_store is None
