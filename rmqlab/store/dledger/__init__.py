"""DLedger CommitLog mode: the broker's commitlog as a DLedger Raft log (RocketMQ's store/.../dledger/)."""

from rmqlab.store.dledger.dledger_commit_log import DLedgerCommitLog, dledger_config_of

__all__ = ["DLedgerCommitLog", "dledger_config_of"]
