"""The click-free path (``mailslot.cli.quick``) is the click command, only faster to start.

The fast path and the click command are built from one declaration (the specs in ``cli.sends``
and ``cli.waits``), and these tests hold them to it: the click command's parameters are exactly
the spec's, and over a table of command lines both paths, each from the same fresh directory,
print the same bytes on standard output and error, exit with the same code and leave the same
files -- with the same thing done to the running command in both (a reply or an item landing, its
directory removed, Ctrl-C, standard output closed). Lines the fast path must not read (help,
unknown or malformed options, a path click refuses) are checked to fall through to click, and the
lines it does read to be read by it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from cli_helpers import asleep_in_its_wait, until

from mailslot import chat, relay
from mailslot.bus import layout as bus_layout
from mailslot.bus import outbox
from mailslot.cli import cli, quick
from mailslot.cli.helpers import SECONDS
from mailslot.cli.spec import COMMON, Param
from mailslot.exchange.create import create_exchange
from mailslot.exchange.entries import send
from mailslot.exchange.layout import load_exchange


def _kind(p: click.Parameter) -> str:
    """What the click parameter takes, in the spec's terms (``spec.KINDS``); anything the fast
    reader does not know is named so that it fails the comparison."""
    t = p.type
    if isinstance(p, click.Option) and p.is_flag:
        return "flag"
    if isinstance(t, click.Path):
        checks = (t.exists, t.readable, t.writable, t.executable, t.resolve_path, t.allow_dash)
        if checks != (False, True, False, False, False, False):
            return f"path with other checks {checks}"
        if not t.file_okay and t.dir_okay and t.type is None:
            return "dir"
        if t.file_okay and not t.dir_okay:
            return "file_path" if t.type is Path else "file" if t.type is None else "other path"
        return "other path"
    if t is click.STRING:
        return "text"
    if t is click.INT:
        return "int"
    if t is SECONDS:
        return "seconds"
    if isinstance(t, click.Choice):
        return f"choice {tuple(t.choices)} case_sensitive={t.case_sensitive}"
    return f"unknown type {t!r}"


def _spec_kind(p: Param) -> str:
    if p.kind == "choice":
        return f"choice {p.choices} case_sensitive={p.case_sensitive}"
    return p.kind


def _click_params(cmd: click.Command) -> list[tuple[Any, ...]]:
    # the top level's settings, as a run has them: click keeps the help option of the first
    # context it is asked in, and a later --help (in this process) would print that one
    ctx = click.Context(cmd, **cli.context_settings)
    return [
        (
            p.name,
            tuple(p.opts),
            _kind(p),
            bool(p.required),
            bool(getattr(p, "hidden", False)),
            p.multiple,
            p.nargs,
            p.envvar,
            p.metavar,
            None if type(p.default).__name__ == "Sentinel" else p.default,  # click's UNSET
            bool(getattr(p, "show_default", False)),
        )
        for p in cmd.get_params(ctx)
        if "--help" not in p.opts  # click's own, read by click alone
    ]


def _spec_params(params: tuple[Param, ...], *, envvars: bool) -> list[tuple[Any, ...]]:
    return [
        (
            p.name,
            p.flags or (p.name,),
            _spec_kind(p),
            p.required,
            p.hidden,
            p.multiple,
            1,
            p.envvar if envvars else None,
            p.metavar,
            p.default,
            p.show_default,
        )
        for p in params
    ]


def _loaded(group: str, name: str | None = None) -> click.Command:
    ctx = click.Context(cli)
    cmd = cli.get_command(ctx, group)
    assert isinstance(cmd, click.Group)
    if name is None:
        return cmd
    sub = cmd.get_command(click.Context(cmd), name)
    assert sub is not None
    return sub


@pytest.mark.parametrize(
    ("group", "name"), [(g, n) for g, names in quick.FAST.items() for n in names]
)
def test_the_click_command_takes_exactly_what_its_spec_declares(group: str, name: str) -> None:
    found = quick.fast_command(group, name)
    assert found is not None
    spec, body = found
    cmd = _loaded(group, name)
    assert _click_params(cmd) == _spec_params(spec.params + COMMON, envvars=False)
    assert cmd.callback is not None and cmd.help == body.__doc__
    assert cmd.allow_interspersed_args and not cmd.ignore_unknown_options
    # the levels above: the group takes --root and --as, the top level also their variables
    assert sorted(_click_params(_loaded(group))) == sorted(_spec_params(COMMON, envvars=False))
    top = [p for p in _click_params(cli) if p[0] != "version"]
    assert top == _spec_params(COMMON, envvars=True)


def test_an_option_added_to_the_click_command_alone_is_caught() -> None:
    cmd = _loaded("chat", "say")
    extra = click.Option(["--urgent"], is_flag=True)
    cmd.params.append(extra)
    try:
        spec = quick.fast_command("chat", "say")[0]  # type: ignore[index]
        assert _click_params(cmd) != _spec_params(spec.params + COMMON, envvars=False)
    finally:
        cmd.params.remove(extra)


# --- the same line, both ways ------------------------------------------------------------------

_CLICK = "import sys\nfrom mailslot.cli import main\nmain(sys.argv[1:])"
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
# a relay line's clock: its [HH:MM] and its T0/T1/T2 stamps in milliseconds since the epoch
_RELAY_CLOCK = re.compile(r"\[\d\d:\d\d\]|\b\d{13}\b")


def _masked(text: str) -> str:
    return _RELAY_CLOCK.sub("<t>", _STAMP.sub("<at>", text))


def _template(base: Path) -> Path:
    t = base / "template"
    (t / "state").mkdir(parents=True)
    ex = create_exchange(t / "ex", ["claude", "olu"], git=False)
    send(load_exchange(ex.root), "claude", "plan", "fyi", "the plan")  # for olu to watch
    (t / "body.md").write_text("from a file\n")
    (t / "adir").mkdir()
    (t / "afile").write_text("x")
    path = chat.new_chat("quick", t, "alice", state=t / "state").path
    chat.join(path, "bob", state=t / "state")
    chat.say(path, "are you there?", "alice", state=t / "state")  # for bob to wait for
    path.rename(t / "chat.txt")
    relay.init(t / "mb", "w1", "manager")  # for w1 to ask
    relay.ask(relay.init(t / "mb-open", "w1", "manager").root, "w1", "first?", wait=False)
    relay.stop(relay.init(t / "mb-stopped", "w1", "manager").root, "manager", "done")
    noisy = relay.init(t / "mb-noisy", "w1", "manager").root
    with open(noisy / "to-w1.md", "a") as f:  # lines in w1's inbox that are not turns
        f.write("junk line\n- [08:00] (manager) id=R09 garbage\n")
    bus_layout.init(t / "bus", consumer="beacon")
    (t / "bus" / "outbox" / "card.txt").write_text("dropped by hand\n")  # for beacon to take
    bus_layout.init(t / "bus-empty", consumer="beacon")
    changed = t / "bus-changed"
    bus_layout.init(changed, consumer="beacon")
    item = outbox.put(changed, "lantern", t / "body.md", recipient="beacon")
    (changed / item.path).write_text("not what the record sums\n")
    return t


def _tree(work: Path) -> dict[str, str]:
    """Every file under ``work`` and its text, time stamps masked; an append's sidecar without
    its header (it names the file's inode and sums over the time stamps); in the state dir,
    long numbers masked."""
    tree = {}
    for p in sorted(work.rglob("*")):
        if p.is_file():
            text = _masked(p.read_text(errors="replace"))
            if p.name.endswith(".intent"):
                text = text.partition("\n")[2]
            if "state" in p.relative_to(work).parts:  # inode numbers, clocks in nanoseconds
                text = re.sub(r"\d{7,}", "<n>", text)
            tree[str(p.relative_to(work))] = text
    return tree


# What is done to a running command, the same for both paths: called with the process, its
# directory and its environment once it has started.
During = Callable[["subprocess.Popen[bytes]", Path, dict[str, str]], None]


def _run(
    how: list[str],
    work: Path,
    template: Path,
    args: list[Any],
    env: dict[str, str],
    stdin: bytes,
    during: During | None = None,
    stdout_closed: bool = False,
) -> tuple[int, bytes, bytes, dict[str, str]]:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(template, work)
    full_env = {**os.environ, "MAILSLOT_STATE_DIR": str(work / "state"), **env}
    full_env.pop("COLUMNS", None)
    stdout: int = subprocess.PIPE
    if stdout_closed:  # a pipe whose reader went away before anything was written
        read_end, stdout = os.pipe()
        os.close(read_end)
    try:
        p = subprocess.Popen(
            [sys.executable, *how, *args],
            cwd=work,
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=full_env,
        )
    finally:
        if stdout_closed:
            os.close(stdout)
    with p:
        assert p.stdin is not None
        p.stdin.write(stdin)  # small: it fits the pipe whether or not the command reads it
        p.stdin.close()
        p.stdin = None  # written whole: communicate() has nothing more to send
        try:
            if during is not None:
                during(p, work, full_env)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
    return p.returncode, out or b"", err, _tree(work)


def _same(out: bytes) -> bytes:
    return _masked(out.decode(errors="surrogateescape")).encode(errors="surrogateescape")


def _mailslot(work: Path, env: dict[str, str], *args: str) -> None:
    """Run ``mailslot ARGS`` in ``work`` to completion: the other side's part of a case."""
    subprocess.run(
        [sys.executable, "-m", "mailslot", *args],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _turn_opened(p: subprocess.Popen[bytes], work: Path) -> None:
    """Wait until w1's ask has appended its turn (its watch is armed before that)."""
    until(lambda: "id=C01" in (work / "mb" / "to-manager.md").read_text(), p)


def _manager_replies(p: subprocess.Popen[bytes], work: Path, env: dict[str, str]) -> None:
    _turn_opened(p, work)
    _mailslot(work, env, "--root", "mb", "--as", "manager", "relay", "reply", "--id", "C01", "Fri.")


def _manager_stops(p: subprocess.Popen[bytes], work: Path, env: dict[str, str]) -> None:
    _turn_opened(p, work)
    _mailslot(work, env, "--root", "mb", "--as", "manager", "relay", "stop", "the human said so")


def _interrupted_once_asleep(p: subprocess.Popen[bytes], work: Path, env: dict[str, str]) -> None:
    until(lambda: asleep_in_its_wait(p), p)
    p.send_signal(signal.SIGINT)


def _an_item_lands(p: subprocess.Popen[bytes], work: Path, env: dict[str, str]) -> None:
    until(lambda: asleep_in_its_wait(p), p)
    _mailslot(work, env, "--root", "bus-empty", "--as", "lantern", "outbox", "put", "body.md")


def _outbox_removed(p: subprocess.Popen[bytes], work: Path, env: dict[str, str]) -> None:
    until(lambda: asleep_in_its_wait(p), p)
    shutil.rmtree(work / "bus-empty" / "outbox")


SEND = ["--root", "ex", "--as", "claude", "exchange", "send"]
SAY = ["chat", "say", "chat.txt"]
WATCH = ["--root", "ex", "exchange", "watch"]
WAIT = ["chat", "wait", "chat.txt"]
ASK = ["--root", "mb", "--as", "w1", "relay", "ask"]
TAKE = ["--root", "bus", "--as", "beacon", "outbox", "take"]
TAKE_EMPTY = ["--root", "bus-empty", "--as", "beacon", "outbox", "take"]

# (id, argv, environment, stdin, what happens: "fast" read and run without click; "usage" read,
# but the body finds it misused and hands it to click; "click" not read, click runs it)
CASES: list[tuple[str, list[Any], dict[str, str], bytes, str]] = [
    ("send", [*SEND, "--topic", "t1", "--action", "fyi", "hello"], {}, b"", "fast"),
    ("send --json", [*SEND, "--topic", "t1", "--action", "fyi", "hi", "--json"], {}, b"", "fast"),
    (
        "send from the environment",
        ["exchange", "send", "--topic", "t1", "--action", "required", "hi"],
        {"MAILSLOT_ROOT": "ex", "MAILSLOT_AGENT": "claude"},
        b"",
        "fast",
    ),
    (
        "--as after the command overrides the environment",
        ["exchange", "send", "--topic", "t1", "--action", "fyi", "--as", "olu", "hi"],
        {"MAILSLOT_ROOT": "ex", "MAILSLOT_AGENT": "claude"},
        b"",
        "fast",
    ),
    (
        "options at every level, = values, -- then text",
        [
            "exchange",
            "--root",
            "ex",
            "send",
            "--as=claude",
            "--topic=t1",
            "--action=fyi",
            "--",
            "--not an option",
        ],
        {},
        b"",
        "fast",
    ),
    (
        "text that starts with -",
        [*SEND, "--topic", "t1", "--action", "fyi", "- item one"],
        {},
        b"",
        "fast",
    ),
    ("body - from stdin", [*SEND, "--topic", "t", "--action", "fyi", "-"], {}, b"piped\n", "fast"),
    ("no body: stdin", [*SEND, "--topic", "t", "--action", "fyi"], {}, b"piped\n", "fast"),
    (
        "--body-file",
        [*SEND, "--topic", "t", "--action", "fyi", "--body-file", "body.md"],
        {},
        b"",
        "fast",
    ),
    (
        "repeated options: the last wins",
        [*SEND, "--topic", "a", "--topic", "b", "--action", "fyi", "--json", "--json", "x"],
        {},
        b"",
        "fast",
    ),
    (
        "--to the other side",
        [*SEND, "--topic", "t", "--action", "fyi", "--to", "olu", "x"],
        {},
        b"",
        "fast",
    ),
    ("refused action", [*SEND, "--topic", "t1", "--action", "maybe", "hi"], {}, b"", "fast"),
    (
        "not a side",
        [*SEND[:3], "nobody", *SEND[4:], "--topic", "t", "--action", "fyi", "x"],
        {},
        b"",
        "fast",
    ),
    (
        "no --as",
        ["--root", "ex", "exchange", "send", "--topic", "t", "--action", "fyi", "x"],
        {},
        b"",
        "fast",
    ),
    (
        "not an exchange",
        [
            "--root",
            "adir",
            "--as",
            "claude",
            "exchange",
            "send",
            "--topic",
            "t",
            "--action",
            "fyi",
            "x",
        ],
        {},
        b"",
        "fast",
    ),
    ("bad topic", [*SEND, "--topic", "../up", "--action", "fyi", "x"], {}, b"", "fast"),
    (
        "missing body file",
        [*SEND, "--topic", "t", "--action", "fyi", "--body-file", "nope.md"],
        {},
        b"",
        "fast",
    ),
    ("stdin not UTF-8", [*SEND, "--topic", "t", "--action", "fyi", "-"], {}, b"caf\xe9\n", "fast"),
    ("argv not UTF-8", [*SEND, "--topic", "t", "--action", "fyi", b"caf\xe9"], {}, b"", "fast"),
    (
        "body and --body-file",
        [*SEND, "--topic", "t", "--action", "fyi", "--body-file", "body.md", "x"],
        {},
        b"",
        "usage",
    ),
    (
        "--to this side",
        [*SEND, "--topic", "t", "--action", "fyi", "--to", "claude", "x"],
        {},
        b"",
        "usage",
    ),
    ("--help", [*SEND, "--help"], {}, b"", "click"),
    ("-h", [*SEND, "-h"], {}, b"", "click"),
    ("--version", ["--version"], {}, b"", "click"),
    ("no --topic", [*SEND, "--action", "fyi", "x"], {}, b"", "click"),
    ("unknown option", [*SEND, "--topic", "t", "--action", "fyi", "--nope", "x"], {}, b"", "click"),
    ("prefix of an option", [*SEND, "--top", "t", "--action", "fyi", "x"], {}, b"", "click"),
    (
        "flag given a value",
        [*SEND, "--topic", "t", "--action", "fyi", "--json=1", "x"],
        {},
        b"",
        "click",
    ),
    ("option without its value", [*SEND, "--action", "fyi", "x", "--topic"], {}, b"", "click"),
    (
        "a value that starts with -",
        [*SEND, "--topic", "-t", "--action", "fyi", "x"],
        {},
        b"",
        "click",
    ),
    ("an empty value", [*SEND, "--topic", "", "--action", "fyi", "x"], {}, b"", "click"),
    (
        "an empty --as",
        [*SEND, "--as", "", "--topic", "t", "--action", "fyi", "x"],
        {},
        b"",
        "click",
    ),
    ("an empty body", [*SEND, "--topic", "t", "--action", "fyi", ""], {}, b"", "click"),
    ("two bodies", [*SEND, "--topic", "t", "--action", "fyi", "x", "y"], {}, b"", "click"),
    (
        "--body-file a directory",
        [*SEND, "--topic", "t", "--action", "fyi", "--body-file", "adir"],
        {},
        b"",
        "click",
    ),
    (
        "--root a file",
        [
            "--root",
            "afile",
            "--as",
            "claude",
            "exchange",
            "send",
            "--topic",
            "t",
            "--action",
            "fyi",
            "x",
        ],
        {},
        b"",
        "click",
    ),
    (
        "MAILSLOT_ROOT a file",
        ["--as", "claude", "exchange", "send", "--topic", "t", "--action", "fyi", "x"],
        {"MAILSLOT_ROOT": "afile"},
        b"",
        "click",
    ),
    (
        "-- before the group",
        ["--", "exchange", "send", "--topic", "t", "--action", "fyi", "x"],
        {},
        b"",
        "click",
    ),
    (
        "--json before the command",
        [
            "--root",
            "ex",
            "--as",
            "claude",
            "exchange",
            "--json",
            "send",
            "--topic",
            "t",
            "--action",
            "fyi",
            "x",
        ],
        {},
        b"",
        "click",
    ),
    (
        "shell completion",
        [*SEND, "--topic", "t"],
        {
            "_MAILSLOT_COMPLETE": "bash_complete",
            "COMP_WORDS": "mailslot exchange",
            "COMP_CWORD": "1",
        },
        b"",
        "click",
    ),
    ("say", [*SAY, "--as", "alice", "hello all"], {}, b"", "fast"),
    ("say --json", [*SAY, "--as", "alice", "--json", "hello"], {}, b"", "fast"),
    ("say from stdin", [*SAY, "--as", "alice", "-"], {}, b"line one\nline two\n", "fast"),
    ("say as MAILSLOT_AGENT", [*SAY, "hi"], {"MAILSLOT_AGENT": "alice"}, b"", "fast"),
    ("say -- then a dash", ["--as", "alice", *SAY, "--", "-x"], {}, b"", "fast"),
    ("say to a missing chat", ["chat", "say", "gone.txt", "--as", "alice", "hi"], {}, b"", "fast"),
    (
        "say to a file that is no chat",
        ["chat", "say", "body.md", "--as", "alice", "hi"],
        {},
        b"",
        "fast",
    ),
    ("say stdin not UTF-8", [*SAY, "--as", "alice", "-"], {}, b"\xff\xfe", "fast"),
    ("say without FILE", ["chat", "say"], {}, b"", "click"),
    ("say to a directory", ["chat", "say", "adir", "--as", "alice", "hi"], {}, b"", "click"),
    ("say -h", [*SAY, "-h"], {}, b"", "click"),
    ("chat read is not fast", ["chat", "read", "chat.txt"], {}, b"", "click"),
    ("watch delivers", [*WATCH, "--as", "olu", "--timeout", "30"], {}, b"", "fast"),
    ("watch --peek --json", [*WATCH, "--as", "olu", "--peek", "--json"], {}, b"", "fast"),
    ("watch, nothing new", [*WATCH, "--as", "claude", "--timeout", "0"], {}, b"", "fast"),
    (
        "watch times out --json",
        [*WATCH, "--as", "claude", "--timeout=0", "--json"],
        {},
        b"",
        "fast",
    ),
    (
        "watch fyi for required",
        [*WATCH, "--as", "olu", "--action", "required", "--timeout", "0"],
        {},
        b"",
        "fast",
    ),
    (
        "watch a bad --action",
        [*WATCH, "--as", "olu", "--action", "some", "--timeout", "0"],
        {},
        b"",
        "fast",
    ),
    ("watch --ack twice", [*WATCH, "--as", "olu", "--ack", "k1", "--ack", "k2"], {}, b"", "fast"),
    (
        "watch --mark-all-seen",
        [*WATCH, "--as", "olu", "--mark-all-seen", "--json"],
        {},
        b"",
        "fast",
    ),
    ("watch without --as", [*WATCH, "--timeout", "0"], {}, b"", "fast"),
    ("watch a negative timeout", [*WATCH, "--as", "olu", "--timeout", "-1"], {}, b"", "click"),
    ("watch a nan timeout", [*WATCH, "--as", "olu", "--timeout", "nan"], {}, b"", "click"),
    ("watch a timeout past a week", [*WATCH, "--as", "olu", "--timeout", "1e9"], {}, b"", "click"),
    ("watch a word for a timeout", [*WATCH, "--as", "olu", "--timeout", "soon"], {}, b"", "click"),
    ("watch an argument", [*WATCH, "--as", "olu", "now"], {}, b"", "click"),
    ("wait delivers", [*WAIT, "--as", "bob", "--timeout", "30"], {}, b"", "fast"),
    ("wait --json", [*WAIT, "--as", "bob", "--json"], {}, b"", "fast"),
    (
        "wait from a cursor",
        [*WAIT, "--as", "alice", "--cursor", "0", "--timeout", "0"],
        {},
        b"",
        "fast",
    ),
    ("wait, nothing new", [*WAIT, "--as", "alice", "--timeout", "0", "--json"], {}, b"", "fast"),
    (
        "wait on a missing chat",
        ["chat", "wait", "gone.txt", "--as", "bob", "--timeout", "0"],
        {},
        b"",
        "fast",
    ),
    ("wait a word for a cursor", [*WAIT, "--as", "bob", "--cursor", "start"], {}, b"", "click"),
    ("wait a timeout past a week", [*WAIT, "--as", "bob", "--timeout", "700000"], {}, b"", "click"),
    ("wait on a directory", ["chat", "wait", "adir", "--as", "bob"], {}, b"", "click"),
    ("ask delivers the reply", [*ASK, "--timeout", "30", "When?"], {}, b"", "fast"),
    ("ask delivers --json", [*ASK, "--json", "When?"], {}, b"", "fast"),
    ("ask delivers, stdout closed", [*ASK, "When?"], {}, b"", "fast"),
    ("ask, stopped while waiting", [*ASK, "When?"], {}, b"", "fast"),
    ("ask, Ctrl-C while waiting", [*ASK, "When?"], {}, b"", "fast"),
    ("ask --no-wait", [*ASK, "--no-wait", "When?"], {}, b"", "fast"),
    ("ask --no-wait --json", [*ASK, "--no-wait", "--json", "When?"], {}, b"", "fast"),
    ("ask - from stdin", [*ASK, "--no-wait", "-"], {}, b"from stdin\n", "fast"),
    ("ask no text: stdin", [*ASK, "--no-wait"], {}, b"from stdin\n", "fast"),
    ("ask stdin not UTF-8", [*ASK, "--no-wait", "-"], {}, b"caf\xe9\n", "fast"),
    ("ask argv not UTF-8", [*ASK, "--no-wait", b"caf\xe9"], {}, b"", "fast"),
    ("ask a say past the limit", [*ASK, "--no-wait", "x" * 1001], {}, b"", "fast"),
    ("ask two lines", [*ASK, "--no-wait", "one\ntwo"], {}, b"", "fast"),
    ("ask text that starts with -", [*ASK, "--no-wait", "- [14:02] (w1) hi"], {}, b"", "fast"),
    ("ask -- then a dash", [*ASK, "--no-wait", "--", "-x"], {}, b"", "fast"),
    ("ask --kind c (any case)", [*ASK, "--kind", "c", "--no-wait", "x"], {}, b"", "fast"),
    ("ask --kind Q as the worker", [*ASK, "--kind=Q", "--no-wait", "x"], {}, b"", "fast"),
    ("ask --to the manager", [*ASK, "--to", "manager", "--no-wait", "x"], {}, b"", "fast"),
    ("ask --to someone else", [*ASK, "--to", "boss", "--no-wait", "x"], {}, b"", "fast"),
    (
        "ask from the environment",
        ["relay", "ask", "--no-wait", "x"],
        {"MAILSLOT_ROOT": "mb", "MAILSLOT_AGENT": "w1"},
        b"",
        "fast",
    ),
    ("ask as a stranger", [*ASK[:3], "nobody", *ASK[4:], "--no-wait", "x"], {}, b"", "fast"),
    ("ask without --as", ["--root", "mb", "relay", "ask", "--no-wait", "x"], {}, b"", "fast"),
    ("ask times out", [*ASK, "--timeout", "0", "x"], {}, b"", "fast"),
    ("ask times out --json", [*ASK, "--timeout=0", "--json", "x"], {}, b"", "fast"),
    ("ask, a turn still open", ["--root", "mb-open", *ASK[2:], "--no-wait", "x"], {}, b"", "fast"),
    ("ask a stopped relay", ["--root", "mb-stopped", *ASK[2:], "x"], {}, b"", "fast"),
    (
        "ask past lines that are no turns",
        ["--root", "mb-noisy", *ASK[2:], "--timeout", "0", "x"],
        {},
        b"",
        "fast",
    ),
    ("ask where no relay is", ["--root", "adir", *ASK[2:], "x"], {}, b"", "fast"),
    ("ask --help", [*ASK, "--help"], {}, b"", "click"),
    ("ask --kind X", [*ASK, "--kind", "X", "--no-wait", "x"], {}, b"", "click"),
    ("ask --kind without a value", [*ASK, "x", "--kind"], {}, b"", "click"),
    ("ask a negative timeout", [*ASK, "--timeout", "-1", "x"], {}, b"", "click"),
    ("ask an empty text", [*ASK, "--no-wait", ""], {}, b"", "click"),
    ("ask two texts", [*ASK, "--no-wait", "x", "y"], {}, b"", "click"),
    ("ask --no-wait given a value", [*ASK, "--no-wait=yes", "x"], {}, b"", "click"),
    ("--json before ask", [*ASK[:-1], "--json", "ask", "x"], {}, b"", "click"),
    (
        "relay serve is not fast",
        ["--root", "mb", "--as", "manager", "relay", "serve", "--timeout", "0"],
        {},
        b"",
        "click",
    ),
    ("take", TAKE, {}, b"", "fast"),
    ("take --json", [*TAKE, "--json"], {}, b"", "fast"),
    ("take --wait, an item there", [*TAKE, "--wait", "30"], {}, b"", "fast"),
    ("take --wait=0", [*TAKE, "--wait=0"], {}, b"", "fast"),
    ("take, stdout closed", TAKE, {}, b"", "fast"),
    (
        "take from the environment",
        ["outbox", "take"],
        {"MAILSLOT_ROOT": "bus", "MAILSLOT_AGENT": "beacon"},
        b"",
        "fast",
    ),
    ("take, nothing there", TAKE_EMPTY, {}, b"", "fast"),
    ("take, nothing there --json", [*TAKE_EMPTY, "--json"], {}, b"", "fast"),
    ("take --wait times out --json", [*TAKE_EMPTY, "--wait", "0.2", "--json"], {}, b"", "fast"),
    ("take --wait, an item lands", [*TAKE_EMPTY, "--wait", "30", "--json"], {}, b"", "fast"),
    ("take --wait, outbox/ removed", [*TAKE_EMPTY, "--wait", "30"], {}, b"", "fast"),
    ("take --wait, Ctrl-C", [*TAKE_EMPTY, "--wait", "30"], {}, b"", "fast"),
    ("take, bytes not as recorded", ["--root", "bus-changed", *TAKE[2:]], {}, b"", "fast"),
    ("take by another than the consumer", [*TAKE[:3], "lantern", *TAKE[4:]], {}, b"", "fast"),
    ("take without --as", ["--root", "bus", "outbox", "take"], {}, b"", "fast"),
    ("take where no bus is", ["--root", "mb", *TAKE[2:]], {}, b"", "fast"),
    ("take -h", [*TAKE, "-h"], {}, b"", "click"),
    ("take --wait nan", [*TAKE, "--wait", "nan"], {}, b"", "click"),
    ("take --wait -1", [*TAKE, "--wait", "-1"], {}, b"", "click"),
    ("take an argument", [*TAKE, "card.txt"], {}, b"", "click"),
    ("take --json given a value", [*TAKE, "--json=1"], {}, b"", "click"),
    ("take --wait without a value", [*TAKE, "--wait"], {}, b"", "click"),
    ("outbox list is not fast", ["--root", "bus", "outbox", "list"], {}, b"", "click"),
]

# What is done to the running command in some cases (by id), the same on both paths.
DURING: dict[str, During] = {
    "ask delivers the reply": _manager_replies,
    "ask delivers --json": _manager_replies,
    "ask delivers, stdout closed": _manager_replies,
    "ask, stopped while waiting": _manager_stops,
    "ask, Ctrl-C while waiting": _interrupted_once_asleep,
    "take --wait, an item lands": _an_item_lands,
    "take --wait, outbox/ removed": _outbox_removed,
    "take --wait, Ctrl-C": _interrupted_once_asleep,
}
# Cases whose standard output is a pipe nobody reads any more: what was taken is given back.
STDOUT_CLOSED = {"ask delivers, stdout closed", "take, stdout closed"}
# How the cases above end (both paths alike, and as meant: the reply did come, and so on).
EXITS = {
    "ask delivers the reply": 0,
    "ask delivers --json": 0,
    "ask delivers, stdout closed": 141,
    "ask, stopped while waiting": 4,
    "ask, Ctrl-C while waiting": 130,
    "take --wait, an item lands": 0,
    "take --wait, outbox/ removed": 4,
    "take --wait, Ctrl-C": 130,
    "take, stdout closed": 141,
}


@pytest.mark.parametrize(("case", "argv", "env", "stdin", "path"), CASES, ids=[c[0] for c in CASES])
def test_the_fast_path_and_click_answer_alike(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    argv: list[Any],
    env: dict[str, str],
    stdin: bytes,
    path: str,
) -> None:
    template = _template(tmp_path)
    work = tmp_path / "work"
    # which path the line takes: read by the fast reader or not (in this process, same setup)
    shutil.copytree(template, work)
    monkeypatch.chdir(work)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    words = [os.fsdecode(a) for a in argv]
    assert (quick.read_line(words) is not None) == (path in ("fast", "usage")) or (
        path == "click" and "_MAILSLOT_COMPLETE" in env
    )
    monkeypatch.chdir(tmp_path)

    during, closed = DURING.get(case), case in STDOUT_CLOSED
    fast = _run(["-m", "mailslot"], work, template, argv, env, stdin, during, closed)
    slow = _run(["-c", _CLICK], work, template, argv, env, stdin, during, closed)
    assert fast[0] == slow[0], (fast, slow)
    assert fast[0] == EXITS.get(case, fast[0]), fast
    assert _same(fast[1]) == _same(slow[1])
    assert _same(fast[2]) == _same(slow[2])
    assert fast[3] == slow[3]
    if path == "usage":
        assert fast[0] == 2 and b"Usage: mailslot" in fast[2]
    if path == "fast" and fast[0] == 0 and not {"watch", "wait"} & set(argv):
        assert fast[3] != _tree(template)  # it did write something
