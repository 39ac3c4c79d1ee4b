"""What a command loads: each command imports only the modules it uses.

Agents call ``mailslot --help`` and one-shot sends many times a day, so start-up is paid on every
call; an agent blocked on a waiting command waits for its exit, and the kernel's teardown of the
process grows with what it loaded. ``--help`` loads no channel, no YAML and none of the core disk
modules; a send or a chat message loads no web or MCP module and not the kernel-event waiter; a
blocking command loads no socket, crypto, logging or process module. Each command runs in a
fresh interpreter through the real entry point, and the module names are read at its exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mailslot import chat, relay
from mailslot.bus import layout as bus_layout
from mailslot.exchange.create import create_exchange
from mailslot.exchange.entries import send
from mailslot.exchange.layout import load_exchange

# Runs the real entry point (``mailslot.__main__.main``) on argv[2:], then writes the names in
# sys.modules (as JSON) to the file in argv[1]: at the one exit every command ends through
# (``core.ending.end``, replaced before anything imports it), or at the SystemExit of a run that
# ends without it (the top-level --help).
_WRAPPER = """
import json, sys
import mailslot.core.ending as ending

out = sys.argv[1]

def _record():
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)

def _record_then_exit(code):
    _record()
    raise SystemExit(code)

ending.end = _record_then_exit
from mailslot.__main__ import main
try:
    main(sys.argv[2:])
except SystemExit:
    import os
    if not os.path.exists(out):
        _record()
    raise
"""

CHANNELS = ("exchange", "chat", "relay", "bus", "web", "mcpserver")
WEB_AND_MCP = ("fastapi", "starlette", "uvicorn", "httpx", "httpcore", "anyio", "mcp", "pydantic")
# core modules that touch the disk, wait on kernel events or parse YAML: a send needs some of
# them, --help none
CORE_AT_WORK = ("fsio", "cursor", "wait", "formats", "message", "clock", "durable", "git")


def _modules(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> set[str]:
    out = tmp_path / "modules.json"
    p = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(out), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "MAILSLOT_STATE_DIR": str(tmp_path / "state"), **(env or {})},
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return set(json.loads(out.read_text()))


def _under(modules: set[str], *packages: str) -> set[str]:
    return {m for m in modules for p in packages if m == p or m.startswith(p + ".")}


def test_help_loads_no_channel_yaml_or_disk_module(tmp_path: Path) -> None:
    # click's own --help: what runs when the terminal is narrower than the stored text
    loaded = _modules(tmp_path, "--help", env={"COLUMNS": "60"})
    assert "mailslot.cli.command" in loaded
    assert not _under(loaded, *(f"mailslot.{c}" for c in CHANNELS))
    assert not _under(loaded, *(f"mailslot.cli.{c}" for c in (*CHANNELS, "mcp")))
    assert not _under(loaded, *(f"mailslot.core.{m}" for m in CORE_AT_WORK))
    assert not _under(loaded, "yaml", *WEB_AND_MCP)


def test_top_help_from_the_entry_point_loads_no_click_typing_or_threading() -> None:
    # the console script's own path (``mailslot.__main__``), read by the interpreter's importtime
    entry = "import sys; from mailslot.__main__ import main; main()"
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", entry, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Usage: mailslot [OPTIONS] COMMAND [ARGS]...")
    loaded = {ln.rsplit("|", 1)[1].strip() for ln in p.stderr.splitlines() if "|" in ln}
    assert "mailslot.tophelp" in loaded
    assert not loaded & {"click", "typing", "threading", "re", "enum"}, loaded


def test_group_help_loads_its_commands_not_its_channel(tmp_path: Path) -> None:
    loaded = _modules(tmp_path, "exchange", "--help")
    assert "mailslot.cli.exchange" in loaded
    assert not _under(loaded, *(f"mailslot.{c}" for c in CHANNELS), "yaml", *WEB_AND_MCP)


def test_exchange_send_loads_no_web_mcp_or_waiter(tmp_path: Path) -> None:
    root = create_exchange(tmp_path / "ex", ["claude", "olu"], git=False).root
    args = ["--root", str(root), "--as", "olu", "exchange", "send"]
    loaded = _modules(tmp_path, *args, "--topic", "t", "--action", "fyi", "hello")
    [sent] = root.glob("to-claude/*-t/0001-olu.md")
    assert sent.read_text().endswith("hello\n")
    assert not _under(loaded, *WEB_AND_MCP, "mailslot.web", "mailslot.mcpserver", "mailslot.chat")
    assert not _under(loaded, "mailslot.cli.web", "mailslot.cli.mcp", "mailslot.core.wait")
    # nor the exchange's other commands and modules: the health commands, STATE.md, INDEX.md
    assert not _under(loaded, "mailslot.cli.exchange_health", "mailslot.exchange.state")
    assert not _under(loaded, "mailslot.exchange.index")
    assert "logging" not in loaded  # a tenth of a send's start-up: only a rare warning needs it
    assert not loaded & {"socket", "secrets", "_hashlib"}  # the lock's record needs none of them
    # nor click (half of a start-up): the line is read by mailslot.cli.quick
    assert "mailslot.cli.quick" in loaded
    assert not _under(loaded, "click", "mailslot.cli.command", "mailslot.cli.helpers")
    assert not _under(loaded, "mailslot.cli.exchange", "mailslot.cli.shown")
    # nor dataclasses (it loads inspect, ast, dis and tokenize): a send reads no entry, and its
    # records (the exchange, the topic, the result) are core.record records
    assert not loaded & {"dataclasses", "inspect", "ast", "dis", "tokenize"}
    assert "mailslot.exchange.entry" not in loaded


def test_chat_say_loads_no_web_mcp_or_waiter(tmp_path: Path) -> None:
    path = chat.new_chat("start-up", tmp_path, "alice", state=tmp_path / "state").path
    loaded = _modules(tmp_path, "chat", "say", str(path), "--as", "bob", "hi there")
    assert "hi there" in path.read_text()
    assert not _under(loaded, *WEB_AND_MCP, "mailslot.web", "mailslot.mcpserver")
    assert not _under(loaded, "mailslot.exchange", "mailslot.cli.web", "mailslot.cli.mcp")
    assert not _under(loaded, "mailslot.core.wait")
    assert "logging" not in loaded
    assert not loaded & {"socket", "secrets", "_hashlib"}
    assert "mailslot.cli.quick" in loaded
    assert not _under(loaded, "click", "mailslot.cli.command", "mailslot.cli.helpers")
    assert not _under(loaded, "mailslot.cli.chat", "mailslot.cli.shown")
    # nor the waiter, the cursors (a say with --as reads no remembered name) or dataclasses
    assert not _under(loaded, "mailslot.chat.waiter", "mailslot.core.cursor")
    assert not loaded & {"dataclasses", "inspect", "ast", "dis", "tokenize"}


def test_a_send_that_fails_still_loads_click_only_to_say_so(tmp_path: Path) -> None:
    # the failure's line comes from the click group's own mapping (byte for byte the same)
    root = create_exchange(tmp_path / "ex", ["claude", "olu"], git=False).root
    out = tmp_path / "modules.json"
    args = ["--root", str(root), "--as", "olu", "exchange", "send", "--topic", "t"]
    p = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(out), *args, "--action", "maybe", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1 and p.stderr.startswith("mailslot: error: "), p.stderr
    loaded = set(json.loads(out.read_text()))
    assert "mailslot.cli.command" in loaded and "mailslot.cli.exchange" not in loaded


# What a blocking command must not load: each maps a shared library or builds tables the wait
# and its state write never use, and the caller waits while the kernel tears them down at exit.
HEAVY = ("socket", "secrets", "hashlib", "_hashlib", "logging", "subprocess", "decimal")


def _deliver_then_modules(tmp_path: Path, args: list[str], deliver: Any) -> set[str]:
    """Run ``mailslot *args`` (a blocking command) through the real entry point, call
    ``deliver()`` once it is running, and return the modules loaded when it ended (exit 0)."""
    out = tmp_path / "modules.json"
    env = {**os.environ, "MAILSLOT_STATE_DIR": str(tmp_path / "state")}
    cmd = [sys.executable, "-c", _WRAPPER, str(out), *args]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as p:
        deliver()
        stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 0, stderr.decode()
    assert stdout  # it delivered what came
    return set(json.loads(out.read_text()))


def _exchange_watch(tmp_path: Path) -> tuple[list[str], Any]:
    ex = create_exchange(tmp_path / "ex", ["claude", "olu"], git=False)
    send(load_exchange(ex.root), "claude", "plan", "fyi", "the plan")
    args = ["--root", str(ex.root), "--as", "olu", "exchange", "watch", "--timeout", "30"]
    return args, lambda: None


def _chat_wait(tmp_path: Path) -> tuple[list[str], Any]:
    path = chat.new_chat("wait", tmp_path, "alice", state=tmp_path / "state").path
    chat.join(path, "bob", state=tmp_path / "state")
    chat.say(path, "are you there?", "alice", state=tmp_path / "state")
    return ["chat", "wait", str(path), "--as", "bob", "--timeout", "30"], lambda: None


def _relay_ask(tmp_path: Path) -> tuple[list[str], Any]:
    mb = relay.init(tmp_path / "mb", "w1", "manager").root

    def answer() -> None:  # once the turn is open, as the manager would
        deadline = time.monotonic() + 30
        while "id=C01" not in (mb / "to-manager.md").read_text():
            assert time.monotonic() < deadline, "relay ask never opened its turn"
            time.sleep(0.01)
        relay.reply(mb, "manager", "C01", "Friday.")

    return ["--root", str(mb), "--as", "w1", "relay", "ask", "--timeout", "30", "When?"], answer


def _outbox_take(tmp_path: Path) -> tuple[list[str], Any]:
    root = tmp_path / "bus"
    bus_layout.init(root, consumer="beacon")
    (root / "outbox" / "card.txt").write_text("dropped by hand\n")
    return ["--root", str(root), "--as", "beacon", "outbox", "take", "--wait", "30"], lambda: None


@pytest.mark.parametrize(
    "setup",
    [_exchange_watch, _chat_wait, _relay_ask, _outbox_take],
    ids=["exchange watch", "chat wait", "relay ask", "outbox take --wait"],
)
def test_a_blocking_command_loads_no_socket_crypto_logging_or_process_module(
    tmp_path: Path, setup: Any
) -> None:
    args, deliver = setup(tmp_path)
    loaded = _deliver_then_modules(tmp_path, args, deliver)
    assert "mailslot.core.wait" in loaded  # it did arm a wait
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert not _under(loaded, "mailslot.core.git", "statistics")
    assert not _under(loaded, *WEB_AND_MCP, "mailslot.web", "mailslot.mcpserver", "yaml")


@pytest.mark.parametrize(
    "setup", [_exchange_watch, _chat_wait], ids=["exchange watch", "chat wait"]
)
def test_a_blocking_command_agents_run_on_every_waking_loads_no_click(
    tmp_path: Path, setup: Any
) -> None:
    args, deliver = setup(tmp_path)
    loaded = _deliver_then_modules(tmp_path, args, deliver)
    assert "mailslot.cli.quick" in loaded
    assert not _under(loaded, "click", "mailslot.cli.command", "mailslot.cli.helpers")
    assert not _under(loaded, "mailslot.cli.chat", "mailslot.cli.exchange_health")
    # nor dataclasses (with inspect, ast, dis and tokenize, a megabyte of heap freed at exit):
    # the records they read and return are core.record records
    assert not loaded & {"dataclasses", "inspect", "ast", "dis", "tokenize"}


@pytest.mark.parametrize("setup", [_relay_ask, _outbox_take], ids=["relay ask", "outbox take"])
def test_relay_ask_and_outbox_take_load_no_click(tmp_path: Path, setup: Any) -> None:
    # read by mailslot.cli.quick, as exchange watch and chat wait are: the asker waits for the
    # exit, whose teardown grows with what the process mapped (click alone is megabytes)
    args, deliver = setup(tmp_path)
    loaded = _deliver_then_modules(tmp_path, args, deliver)
    assert "mailslot.cli.quick" in loaded
    assert not _under(loaded, "click", "mailslot.cli.command", "mailslot.cli.helpers")
    assert not _under(loaded, "mailslot.cli.relay", "mailslot.cli.bus")


def test_relay_ask_loads_no_dataclasses(tmp_path: Path) -> None:
    # dataclasses loads inspect, ast, dis and tokenize: a heap the asker waits to see torn down at
    # exit; the relay's records (the mailbox, the turn lines, the delivery) are core.record records
    args, deliver = _relay_ask(tmp_path)
    loaded = _deliver_then_modules(tmp_path, args, deliver)
    assert not loaded & {"dataclasses", "inspect", "ast", "dis", "tokenize"}


def test_outbox_take_loads_no_dataclasses_and_no_unicode_tables(tmp_path: Path) -> None:
    # a taker waits for the exit, whose teardown grows with the heap: dataclasses brings
    # inspect, ast, dis and tokenize; unicodedata's tables name a put's item, never a take's
    args, deliver = _outbox_take(tmp_path)
    loaded = _deliver_then_modules(tmp_path, args, deliver)
    assert "mailslot.bus.outbox" in loaded
    assert not _under(loaded, "dataclasses", "inspect", "ast", "dis", "unicodedata")
