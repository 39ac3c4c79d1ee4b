"""Store and forward: a cut link, a killed bridge or server loses nothing and doubles nothing;
the trees converge once the hosts can talk again."""

from __future__ import annotations

import os
import signal

from bridge_helpers import cli, converged, send_many, wait_for


def _entries(host, topic_part: str) -> list[str]:
    return sorted(p for p in host.files() if topic_part in p and not p.endswith("STATE.md"))


def test_a_partition_keeps_both_hosts_writing_and_heals_to_one_tree(pair) -> None:
    pair.proxy.cut()
    sent_a = send_many(pair.a, "a", "cut", 15, "during the partition")
    sent_b = send_many(pair.b, "b", "cut", 15, "during the partition")
    topic = sent_a[0].split("/")[1]
    cli("--root", str(pair.b.root), "--as", "b", "exchange", "state", topic, "blocked")
    # a double claim of each number: (number, from) keeps both
    assert sent_a[0].endswith("0001-a.md") and sent_b[0].endswith("0001-b.md")
    assert not (pair.b.root / sent_a[0]).exists() and not (pair.a.root / sent_b[0]).exists()
    pair.proxy.heal()
    wait_for(lambda: converged(pair.a, pair.b), 30, "convergence after the heal")
    assert len(_entries(pair.a, "-cut/")) == 30
    assert set(sent_a) | set(sent_b) == set(_entries(pair.b, "-cut/"))
    assert b"blocked" in (pair.a.root / "to-a" / topic / "STATE.md").read_bytes()


def test_kill9_of_bridges_and_servers_loses_and_doubles_nothing(pair) -> None:
    sent = send_many(pair.a, "a", "kills", 5, "before")
    wait_for(lambda: converged(pair.a, pair.b), what="first batch")
    pair.b.kill9()  # bridge and server of b die mid-flight
    sent += send_many(pair.a, "a", "kills", 5, "while b is dead")
    pair.b.start()
    # the server alone: the bridge's supervisor restarts it
    old = pair.a.server_pid()
    os.kill(old, signal.SIGKILL)
    sent += send_many(pair.a, "a", "kills", 5, "while a's server restarts")
    wait_for(lambda: pair.a.server_pid() not in (None, old), 20, "a's server restarted")
    sent += send_many(pair.b, "b", "kills", 5, "from b after it came back")
    pair.a.kill9()
    pair.a.start()
    wait_for(lambda: converged(pair.a, pair.b), 40, "convergence after the kills")
    files = _entries(pair.b, "-kills/")
    assert sorted(sent) == files  # every entry once, none missing, none extra
    assert pair.a.status()["conflicts"] == 0 and pair.b.status()["conflicts"] == 0
