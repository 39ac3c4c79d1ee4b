"""The mailslot demo: agents who are never awake together hand each other work.

Everything runs in a temporary directory through the real `mailslot` command, exactly as an
agent's shell would call it, and the demo prints what happened. Run it with `make demo`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXE = shutil.which("mailslot", path=str(Path(sys.executable).parent)) or "mailslot"


class Demo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {
            **os.environ,
            "MAILSLOT_ROOT": str(root),
            "XDG_STATE_HOME": str(root.parent / "state"),
        }

    def run(self, who: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [EXE, "--as", who, *args], env=self.env, text=True, capture_output=True, timeout=60
        )
        if ok and r.returncode != 0:
            raise SystemExit(f"demo step failed: mailslot {' '.join(args)}\n{r.stderr}")
        return r

    def start(self, who: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [EXE, "--as", who, *args],
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def step(text: str) -> None:
    print(f"\n== {text}")


def say(who: str, text: str) -> None:
    for i, line in enumerate(text.strip().splitlines() or [""]):
        print(f"  {(who if i == 0 else ''):>7} | {line}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="mailslot-demo-") as tmp:
        root = Path(tmp) / "exchange"
        d = Demo(root)
        print(f"mailslot demo in {tmp}")

        step("An exchange between Claude Code (claude) and a self-hosted agent (olu)")
        d.run("claude", "exchange", "init", str(root), "--side", "claude", "--side", "olu")
        say(
            "setup",
            "\n".join(
                sorted(
                    p.name + ("/" if p.is_dir() else "") for p in root.iterdir() if p.name != ".git"
                )
            ),
        )

        step("olu blocks on its inbox (kernel file events, no polling); claude sends work")
        d.run("olu", "exchange", "watch", "--mark-all-seen")
        watcher = d.start("olu", "exchange", "watch", "--timeout", "30", "--json")
        time.sleep(0.5)  # let the watcher arm (it would see the entry later anyway)
        sent = time.monotonic()
        r = d.run(
            "claude",
            "exchange",
            "send",
            "--topic",
            "gate-fix",
            "--action",
            "required",
            "Please review the gate fix: the fixture leaked a lock. Is the fix right?",
        )
        say("claude", f"sent {r.stdout.strip()}")
        out, _ = watcher.communicate(timeout=30)
        woke = (time.monotonic() - sent) * 1000
        items = json.loads(out)["items"] if out.strip() else []
        say(
            "olu",
            f"woke {woke:.0f} ms after claude's send began (mostly that command's start-up)",
        )
        for item in items:
            meta = {k: item.get(k) for k in ("from", "action") if item.get(k)}
            say("olu", f"got {item.get('path', item.get('key'))} {meta}")
        topic = r.stdout.strip().split("/")[1]

        step("olu answers with a question of its own, then tries to close its side")
        r = d.run(
            "olu",
            "exchange",
            "send",
            "--topic",
            topic,
            "--action",
            "required",
            "Fix looks right. One question: should the lock be per topic?",
        )
        say("olu", f"sent {r.stdout.strip()}")
        r = d.run("olu", "exchange", "state", topic, "done", ok=False)
        say("olu", f"exit {r.returncode}: {r.stderr.strip()}")
        say("", "(the side that raises 'required' does not mark itself done: a rule in code)")

        step("claude answers; olu closes; claude adds a late FYI after olu's done, then closes")
        d.run(
            "claude",
            "exchange",
            "send",
            "--topic",
            topic,
            "--action",
            "fyi",
            "Per topic, yes: two topics must never share a lock.",
        )
        d.run("olu", "exchange", "state", topic, "done")
        time.sleep(0.01)
        d.run(
            "claude",
            "exchange",
            "send",
            "--topic",
            topic,
            "--action",
            "fyi",
            "Also rebased the branch on main.",
        )
        d.run("claude", "exchange", "state", topic, "done")
        r = d.run("tick", "exchange", "tick", "--json")
        tick = json.loads(r.stdout)
        say("tick", f"archived={tick['archived']} held={tick['held']} commit={tick['commit']}")
        held = next(root.glob(f"to-olu/{topic}/HELD.md"), None)
        if held:
            lines = [ln for ln in held.read_text().splitlines() if ln.strip()][:4]
            shown = [ln if len(ln) <= 96 else ln[:93] + "..." for ln in lines]
            say("tick", "HELD.md in olu's inbox begins:\n" + "\n".join(shown))
        say("", "(archiving here would file claude's last entry before olu read it)")

        step("olu's sweep shows what it owes; it reads, re-affirms done; the next tick archives")
        r = d.run("olu", "exchange", "sweep")
        say("olu", r.stdout)
        d.run("olu", "exchange", "read", topic)
        d.run("olu", "exchange", "state", topic, "done")
        tick = json.loads(d.run("tick", "exchange", "tick", "--json").stdout)
        say("tick", f"released={tick['released']} archived={tick['archived']}")
        log = subprocess.run(
            ["git", "-C", str(root), "log", "--format=%h %an: %s"], text=True, capture_output=True
        ).stdout
        say("git", log)

        step("A live chat: zara blocks in `chat wait`; kiran's `say` wakes her at once")
        chatdir = Path(tmp) / "proj"
        chatdir.mkdir()
        r = d.run(
            "kiran",
            "chat",
            "new",
            "--dir",
            str(chatdir),
            "ship on Friday?",
            "I think we can ship Friday.",
        )
        chat = r.stdout.splitlines()[0]
        d.run("zara", "chat", "join", chat, "Checking the tests first.")
        waiter = d.start("zara", "chat", "wait", chat, "--timeout", "30", "--json")
        time.sleep(0.5)
        sent = time.monotonic()
        d.run("kiran", "chat", "say", chat, "Tests are green on main.")
        out, _ = waiter.communicate(timeout=30)
        got = json.loads(out)["messages"]
        say(
            "zara",
            f"woke {(time.monotonic() - sent) * 1000:.0f} ms after the say began: "
            f"{[(m['from'], m['body'].strip()) for m in got]}",
        )
        print("\nDone. Every message above is a file on disk, fsync'd before its send returned.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
