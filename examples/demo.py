"""The mailslot demo: two agents who are never awake together hand each other work.

Runs in a temporary directory and prints what happened. Everything goes through the real
`mailslot` command, as an agent's shell would call it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXE = shutil.which("mailslot", path=str(Path(sys.executable).parent)) or "mailslot"


def sh(
    *args: str,
    agent: str | None = None,
    root: Path | None = None,
    check: bool = True,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if agent:
        env["MAILSLOT_AGENT"] = agent
    if root:
        env["MAILSLOT_ROOT"] = str(root)
    return subprocess.run(
        [EXE, *args], env=env, text=True, capture_output=True, check=check, input=input
    )


def say(who: str, text: str) -> None:
    print(f"  [{who:>6}] {text}")


def main() -> int:
    from mailslot.core.fsio import numbered_create
    from mailslot.core.wait import wait_until

    with tempfile.TemporaryDirectory(prefix="mailslot-demo-") as tmp:
        root = Path(tmp)
        inbox_olu, inbox_claude = root / "to-olu", root / "to-claude"
        inbox_olu.mkdir()
        inbox_claude.mkdir()
        print(f"mailslot demo in {root}\n")
        print("1. olu is asleep; claude leaves a numbered, durable message in olu's inbox")
        _, path = numbered_create(inbox_olu, "claude.md", "please review the gate fix\n")
        say("claude", f"wrote {path.relative_to(root)}")
        print("2. olu wakes (cron), pulls its inbox, replies, then blocks waiting for more")
        for p in sorted(inbox_olu.iterdir()):
            say("olu", f"read {p.name}: {p.read_text().strip()!r}")
        numbered_create(
            inbox_claude, "olu.md", "reviewed: one nit, see below\n", siblings=[inbox_olu]
        )
        waiter = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys,time;from pathlib import Path;"
                "from mailslot.core.wait import wait_until;"
                "d=Path(sys.argv[1]);seen=set(p.name for p in d.iterdir());t=time.monotonic();"
                "new=wait_until(lambda:[p for p in d.iterdir()"
                " if p.name not in seen and not p.name.startswith('.')] or None,[d],30);"
                "print(new[0].name, f'{(time.monotonic()-t)*1000:.1f}')",
                str(inbox_olu),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.3)
        print("3. claude replies; olu's blocked waiter wakes on the kernel's file event")
        sent = time.monotonic()
        _, path = numbered_create(
            inbox_olu, "claude.md", "thanks, fixed\n", siblings=[inbox_claude]
        )
        say("claude", f"wrote {path.relative_to(root)}")
        out = (waiter.communicate(timeout=30)[0] or "").split()
        say("olu", f"woke for {out[0]} {1000 * (time.monotonic() - sent):.1f} ms after the send")
        print("\nEntries are never overwritten and numbering spans both sides:")
        for d in (inbox_olu, inbox_claude):
            print("  " + d.name + "/: " + ", ".join(sorted(p.name for p in d.iterdir())))
        del wait_until
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
