"""What the chat's tests share: the bash procedures a hand-run agent follows beside mailslot (the
creator's set-up, the locked append, the read after a cursor), a clock moved ahead.

Each procedure is the chat protocol's bash text with its variables passed as arguments, so a test
shows a hand-run agent and a mailslot agent sharing one chat exactly as the protocol tells agents
to work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from mailslot.core import clock

# "Writing messages": the mkdir lock, one `cat >>` of the block, rmdir. A bash function
# (chat file, name, body, optional spin in seconds) that every procedure below appends with.
BASH_APPEND = r"""
bash_append() {
  local CHAT_FILE="$1" NAME="$2" BODY="$3" SPIN="${4:-0.1}" TS
  while ! mkdir "$CHAT_FILE.lock" 2>/dev/null; do sleep "$SPIN"; done
  TS=$(date -Iseconds)
  cat >> "$CHAT_FILE" <<EOF

---MSG---
FROM: $NAME
TIME: $TS
---
$BODY
EOF
  rmdir "$CHAT_FILE.lock"
}
"""

BASH_WRITE = (
    BASH_APPEND
    + r"""
bash_append "$1" "$2" "$3"
"""
)

# "Step 2a: Creator setup": the file in the creator's directory, then the opening message,
# whose TOPIC: line stands where the agent put it (here after a greeting).
BASH_CREATE = (
    BASH_APPEND
    + r"""
NAME="$1"; TOPIC="$2"
CHAT_FILE="$(pwd)/chat-$(date +%Y-%m-%d-%H%M%S).txt"
touch "$CHAT_FILE"
CWD=$(pwd)
bash_append "$CHAT_FILE" "$NAME" "Hi all, I am $NAME.
TOPIC: $TOPIC
CWD: $CWD
My working directory may contain unrelated files."
echo "$CHAT_FILE"
"""
)

# "Step 3: Wait loop", steps 2 and 3: is the chat there, and what is new after the cursor.
BASH_READ = r"""
CHAT_FILE="$1"; CUR="$2"
test -f "$CHAT_FILE" || { echo "MISSING"; exit 0; }
FILESIZE=$(wc -c < "$CHAT_FILE")
if [ "$CUR" -lt "$FILESIZE" ]; then
  tail -c +$((CUR+1)) "$CHAT_FILE"
else
  echo "NO_NEW"
fi
"""


def _bash_path() -> str:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    return bash


def _bash(script: str, *args: str, cwd: Path | None = None) -> str:
    bash = _bash_path()
    r = subprocess.run(
        [bash, "-c", script, "hand-run-agent", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=True,
    )
    return r.stdout


def bash_write(chat_file: Path, name: str, body: str) -> None:
    """Append one message the way a hand-run bash agent does."""
    _bash(BASH_WRITE, str(chat_file), name, body)


def bash_create(directory: Path, name: str, topic: str) -> Path:
    """Create a chat in ``directory`` the way a hand-run bash creator does; its path."""
    return Path(_bash(BASH_CREATE, name, topic, cwd=directory).strip())


def bash_read(chat_file: Path, cursor: int) -> str:
    """What a hand-run agent reads after byte ``cursor`` (``MISSING``, ``NO_NEW`` or text)."""
    return _bash(BASH_READ, str(chat_file), str(cursor))


def bash_write_started(
    chat_file: Path, name: str, body: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a hand-run bash agent appending one message (it spins while the lock is held);
    the running process."""
    return subprocess.Popen(
        [_bash_path(), "-c", BASH_WRITE, "hand-run-agent", str(chat_file), name, body],
        env=None if env is None else {**os.environ, **env},
    )


def later(seconds: float) -> None:
    """Move mailslot's clock ``seconds`` ahead of the real one."""
    real = clock.now()
    clock.set_clock(lambda: real + timedelta(seconds=seconds))
