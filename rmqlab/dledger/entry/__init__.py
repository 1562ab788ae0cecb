"""A DLedger log entry and its byte layout."""
