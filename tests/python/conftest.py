"""Fixtures of the end-to-end tests with real clients; the helpers are in support.py."""

import pytest

import support


@pytest.fixture
def start_server():
    """Factory: start_server("forward" | "per-shard", shards) -> support.Server.

    Every server started through it is killed at the end of the test.
    """
    servers = []

    def start(mode, shards):
        server = support.start(mode, shards)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
