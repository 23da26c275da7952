"""Fake provider servers on loopback speaking each provider's real HTTP API (issue 28, item 4)."""
