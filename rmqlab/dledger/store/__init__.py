"""DLedger's log stores: the abstract DLedgerStore, the in-memory one, the mapped-file one."""
