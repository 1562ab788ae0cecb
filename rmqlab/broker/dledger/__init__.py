"""The broker in DLedger CommitLog mode: its role follows its DLedger role."""

from rmqlab.broker.dledger.dledger_role_change_handler import DLedgerRoleChangeHandler

__all__ = ["DLedgerRoleChangeHandler"]
