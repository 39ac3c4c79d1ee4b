"""``--root`` and ``MAILSLOT_ROOT`` are expanded as a shell expands a word: ``~`` and ``~user``
to a home directory, and ``~name`` of no user kept as written (a relative path), so the command
answers with its one-line error, never a traceback. Both faces, the click-free one and click's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FACES = {
    "fast": ["-m", "mailslot"],
    "click": ["-c", "import sys\nfrom mailslot.cli import main\nmain(sys.argv[1:])"],
}
NOBODY = "~no-such-user-of-mailslot"
SEND = ["--as", "claude", "exchange", "send", "--topic", "t", "--action", "fyi", "hi"]


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("given", ["option", "env"])
def test_a_root_under_the_home_of_no_user_is_a_path_as_written(
    tmp_path: Path, face: str, given: str
) -> None:
    env = {**os.environ, "MAILSLOT_STATE_DIR": str(tmp_path / "state")}
    args = SEND
    if given == "option":
        args = ["--root", NOBODY, *SEND]
    else:
        env["MAILSLOT_ROOT"] = NOBODY
    r = subprocess.run(
        [sys.executable, *FACES[face], *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"mailslot: error: {tmp_path / NOBODY}: not inside an exchange")
    assert r.stderr.count("\n") == 1 and not (tmp_path / NOBODY).exists()


def test_a_root_under_a_home_is_expanded(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "ex").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "MAILSLOT_STATE_DIR": str(tmp_path / "state")}
    argv = [sys.executable, "-m", "mailslot", "--root", "~/ex", *SEND]
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and f"{home / 'ex'}: not inside an exchange" in r.stderr, r.stderr
