"""A relay write SIGKILLed mid-append: the fragment is cut out by the next write and reported."""

from __future__ import annotations

import json
from pathlib import Path


def test_a_torn_note_is_cut_out_and_reported_by_status(
    tmp_path: Path, killed_in_write, run_cli
) -> None:
    mb = tmp_path / "mb"
    assert (
        run_cli("relay", "init", str(mb), "--worker", "w1", "--manager", "manager").returncode == 0
    )
    base = ("--root", str(mb), "--as", "manager")
    killed_in_write(*base, "relay", "note", "latency " * 400, at_bytes=1024)
    r = run_cli(*base, "relay", "note", "after the crash")
    assert r.returncode == 0, r.stderr
    notes = mb / "state" / "manager-notes.md"
    assert "latency" not in notes.read_text() and "after the crash" in notes.read_text()
    torn = Path(f"{notes}.torn")
    st = json.loads(run_cli("--root", str(mb), "relay", "status", "--json").stdout)
    assert st["torn"] == [{"path": str(torn), "size": torn.stat().st_size}]
    text = run_cli("--root", str(mb), "relay", "status").stdout
    assert f"TORN: {torn.stat().st_size} bytes" in text
