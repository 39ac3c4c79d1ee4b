"""Seed 002's own bash procedures, run beside mailslot: the creator's set-up, the locked append,
the read after a cursor.

Each is the seed's text with its variables passed as arguments, so a test shows a hand-run agent
and a mailslot agent sharing one chat exactly as the seed tells agents to work.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# "Writing messages": the mkdir lock, one `cat >>` of the block, rmdir. A bash function
# (chat file, name, body, optional spin in seconds) that every procedure below appends with.
SEED_APPEND = r"""
seed_append() {
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

SEED_WRITE = (
    SEED_APPEND
    + r"""
seed_append "$1" "$2" "$3"
"""
)

# "Step 2a: Creator setup": the file in the creator's directory, then the opening message,
# whose TOPIC: line stands where the agent put it (here after a greeting).
SEED_CREATE = (
    SEED_APPEND
    + r"""
NAME="$1"; TOPIC="$2"
CHAT_FILE="$(pwd)/chat-$(date +%Y-%m-%d-%H%M%S).txt"
touch "$CHAT_FILE"
CWD=$(pwd)
seed_append "$CHAT_FILE" "$NAME" "Hi all, I am $NAME.
TOPIC: $TOPIC
CWD: $CWD
My working directory may contain unrelated files."
echo "$CHAT_FILE"
"""
)

# "Step 3: Wait loop", steps 2 and 3: is the chat there, and what is new after the cursor.
SEED_READ = r"""
CHAT_FILE="$1"; CUR="$2"
test -f "$CHAT_FILE" || { echo "MISSING"; exit 0; }
FILESIZE=$(wc -c < "$CHAT_FILE")
if [ "$CUR" -lt "$FILESIZE" ]; then
  tail -c +$((CUR+1)) "$CHAT_FILE"
else
  echo "NO_NEW"
fi
"""


def _bash(script: str, *args: str, cwd: Path | None = None) -> str:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash not installed")
    r = subprocess.run(
        [bash, "-c", script, "seed", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=True,
    )
    return r.stdout


def seed_write(chat_file: Path, name: str, body: str) -> None:
    """Append one message the way a hand-run seed-002 agent does."""
    _bash(SEED_WRITE, str(chat_file), name, body)


def seed_create(directory: Path, name: str, topic: str) -> Path:
    """Create a chat in ``directory`` the way a hand-run seed-002 creator does; its path."""
    return Path(_bash(SEED_CREATE, name, topic, cwd=directory).strip())


def seed_read(chat_file: Path, cursor: int) -> str:
    """What a hand-run agent reads after byte ``cursor`` (``MISSING``, ``NO_NEW`` or text)."""
    return _bash(SEED_READ, str(chat_file), str(cursor))
