"""Broker-side components."""
