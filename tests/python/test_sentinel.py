"""Sentinel over Ruvio: three Debian redis-sentinel processes fail a killed Ruvio
primary over to one of its two Ruvio replicas, and redis-py's Sentinel client goes
on writing with no acknowledged write lost (two rounds; scripts/sentinel_failover.py
runs as many as asked)."""

import shutil

import pytest

import support
from sentinel_failover import failover_round


@pytest.mark.skipif(shutil.which("redis-sentinel") is None, reason="redis-sentinel is not installed")
@pytest.mark.skipif(support.target() != "ruvio", reason="Ruvio's own replication")
@pytest.mark.parametrize("round_number", [1, 2])
def test_sentinel_fails_over_without_losing_acknowledged_writes(round_number):
    outcome = failover_round()
    assert outcome["new"] != outcome["old"]
