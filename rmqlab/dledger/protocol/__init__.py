"""DLedger's RPC vocabulary: request and response codes, the request/response bodies."""
