"""The app's live probe of a Postgres store is paced by what it costs the server."""

from __future__ import annotations

import psycopg
from conftest import fixed_clock

from memtui.sources import open_source
from memtui.sources.postgres.change_watch import SAFETY_SECONDS, ChangeWatch

from .support import sql


class Server:
    """A probe that takes ``cost`` seconds of a fake clock, and write counters."""

    def __init__(self, cost: float) -> None:
        self.now = 0.0
        self.cost = cost
        self.writes = 0
        self.counter_reads = 0

    def clock(self) -> float:
        return self.now

    def probe(self) -> tuple[str, int]:
        self.now += self.cost
        return ("version", self.writes)

    def counters(self) -> int:
        self.counter_reads += 1
        return self.writes


def watch(server: Server) -> ChangeWatch:
    return ChangeWatch(server.probe, server.counters, server.clock)


def test_a_cheap_probe_runs_whenever_the_app_asks():
    server = Server(cost=0.004)
    live = watch(server)
    assert live.version() == ("version", 0) and live.probes == 1
    server.now += 0.001
    server.writes += 1
    assert live.version() == ("version", 1) and live.probes == 2
    server.now += 1.0
    live.version()
    assert live.probes == 3  # every time, as before, whatever the counters say
    assert server.counter_reads == 3  # read with each probe, never instead of one


def test_an_expensive_probe_waits_for_its_share_then_for_the_write_counters():
    server = Server(cost=0.3)
    live = watch(server)
    live.version()
    for _ in range(2):  # the app asks every second: within 3 s the last answer stands
        server.now += 1.0
        server.writes += 1
        assert live.version() == ("version", 0)
    assert live.probes == 1
    server.now += 1.5
    assert live.version() == ("version", 2) and live.probes == 2  # the counters moved
    for _ in range(10):  # nothing written: the counters alone are read
        server.now += 1.0
        assert live.version() == ("version", 2)
    assert live.probes == 2
    server.now += SAFETY_SECONDS
    live.version()
    assert live.probes == 3  # statistics may lag or be off: it runs this often anyway


def test_the_write_counters_move_with_another_clients_writes(lg_store):
    """The counters ``ChangeWatch`` waits on are the server's own, for the store's schema:
    another client's insert and delete move them (once its statistics are flushed)."""
    with open_source(lg_store, clock=fixed_clock) as source:
        before = source._write_counters()
        with psycopg.connect(lg_store, autocommit=True) as writer:
            writer.execute(
                "INSERT INTO store (prefix, key, value) VALUES ('notes', 'w1', '{}'::jsonb)"
            )
            writer.execute("DELETE FROM store WHERE prefix = 'notes' AND key = 'w1'")
            writer.execute("SELECT pg_stat_force_next_flush()")
            writer.execute("SELECT 1")
        after = source._write_counters()
        assert after[0] >= before[0] + 1 and after[2] >= before[2] + 1
        assert sql(lg_store, "SELECT count(*) FROM store WHERE key = 'w1'") == [(0,)]
