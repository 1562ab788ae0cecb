"""Controller implementations (``org.apache.rocketmq.controller.impl``): events, heartbeats, metadata."""
