"""DLedger's mapped-file store: DefaultMmapFile, MmapFileList and DLedgerMmapFileStore (package
io.openmessaging.storage.dledger.store.file of DLedger 0.3.1.2)."""
