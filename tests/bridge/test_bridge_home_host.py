"""Off its home host a bridged exchange has no tick of its own, and its doctor knows it."""

from __future__ import annotations

from bridge_helpers import Host, cli


def test_off_home_the_tick_is_refused_and_doctor_does_not_want_a_heartbeat(tmp_path) -> None:
    b = Host(tmp_path, "b")
    b.init(["a"], {"a": "a", "b": "b"}, "a")
    tick = cli("--root", str(b.root), "exchange", "tick", check=False)
    assert tick.returncode == 1 and "runs on host 'a'" in tick.stderr
    doctor = cli("--root", str(b.root), "exchange", "doctor", check=False)
    line = next(ln for ln in doctor.stdout.splitlines() if "heartbeat" in ln)
    assert line.startswith("OK") and "runs on host 'a'" in line
    home = Host(tmp_path, "a")
    home.init(["b"], {"a": "a", "b": "b"}, "a")
    doctor = cli("--root", str(home.root), "exchange", "doctor", check=False)
    assert "FAIL  heartbeat" in doctor.stdout  # the home host must tick
