"""DLedger's small utilities."""
