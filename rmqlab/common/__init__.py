"""Code shared by every component (messages, data versions, persisted config files)."""
