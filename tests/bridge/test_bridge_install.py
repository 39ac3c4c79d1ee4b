"""bridge install: a hardened unit that may write only what the bridge writes."""

from __future__ import annotations

import json
import shutil
import subprocess

from bridge_helpers import Host, cli


def test_the_unit_runs_serve_sandboxed_and_writes_only_the_bridged_paths(tmp_path) -> None:
    h = Host(tmp_path, "a")
    h.base.mkdir(parents=True)
    h.chat.touch()
    h.init(["b"], {"a": "a", "b": "b"}, "a", "--chat", f"room={h.chat}")
    units = tmp_path / "units"
    units.mkdir()
    out = cli("bridge", "install", "--dir", str(h.dir), "--user", "mailslot",
              "--unit-dir", str(units), "--json")  # fmt: skip
    data = json.loads(out.stdout)
    path = units / "mailslot-bridge-a.service"
    assert data["path"] == str(path) and path.read_text() == data["text"]
    text = path.read_text()
    assert f"bridge serve --dir {h.dir}" in text and "User=mailslot" in text
    assert "ProtectSystem=strict" in text and "NoNewPrivileges=yes" in text
    writable = sorted(line.split("=", 1)[1] for line in text.splitlines()
                      if line.startswith("ReadWritePaths="))  # fmt: skip
    assert writable == sorted([str(h.dir), str(h.root), str(h.base)])
    if shutil.which("systemd-analyze"):
        r = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True)
        assert "Unknown key" not in r.stderr and "Invalid" not in r.stderr, r.stderr
    dry = cli("bridge", "install", "--dir", str(h.dir), "--dry-run", "--unit-dir", str(tmp_path))
    assert "[Service]" in dry.stdout and not (tmp_path / "mailslot-bridge-a.service").exists()
    bad = cli("bridge", "install", "--dir", str(h.dir), "--user", "Bad User",
              "--unit-dir", str(units), check=False)  # fmt: skip
    assert bad.returncode == 1 and "user name" in bad.stderr
