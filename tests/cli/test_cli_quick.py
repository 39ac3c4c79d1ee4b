"""The click-free path (``mailslot.cli.quick``) is the click command, only faster to start.

The fast path and the click command are built from one declaration (the specs in ``cli.sends``
and ``cli.waits``), and these tests hold them to it: the click command's parameters are exactly
the spec's, and over a table of command lines both paths, each from the same fresh directory,
print the same bytes on standard output and error, exit with the same code and leave the same
files. Lines the fast path
must not read (help, unknown or malformed options, a path click refuses) are checked to fall
through to click, and the lines it does read to be read by it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from mailslot import chat
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
    return f"unknown type {t!r}"


def _click_params(cmd: click.Command) -> list[tuple[Any, ...]]:
    ctx = click.Context(cmd)
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
            p.kind,
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
    return t


def _tree(work: Path) -> dict[str, str]:
    """Every file under ``work`` and its text, time stamps masked; an append's sidecar without
    its header (it names the file's inode and sums over the time stamps); in the state dir,
    long numbers masked."""
    tree = {}
    for p in sorted(work.rglob("*")):
        if p.is_file():
            text = _STAMP.sub("<at>", p.read_text(errors="replace"))
            if p.name.endswith(".intent"):
                text = text.partition("\n")[2]
            if "state" in p.relative_to(work).parts:  # inode numbers, clocks in nanoseconds
                text = re.sub(r"\d{7,}", "<n>", text)
            tree[str(p.relative_to(work))] = text
    return tree


def _run(
    how: list[str], work: Path, template: Path, args: list[Any], env: dict[str, str], stdin: bytes
) -> tuple[int, bytes, bytes, dict[str, str]]:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(template, work)
    full_env = {**os.environ, "MAILSLOT_STATE_DIR": str(work / "state"), **env}
    full_env.pop("COLUMNS", None)
    p = subprocess.run(
        [sys.executable, *how, *args],
        cwd=work,
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=60,
    )
    return p.returncode, p.stdout, p.stderr, _tree(work)


def _same(out: bytes) -> bytes:
    return _STAMP.sub("<at>", out.decode(errors="surrogateescape")).encode(errors="surrogateescape")


SEND = ["--root", "ex", "--as", "claude", "exchange", "send"]
SAY = ["chat", "say", "chat.txt"]
WATCH = ["--root", "ex", "exchange", "watch"]
WAIT = ["chat", "wait", "chat.txt"]

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
]


@pytest.mark.parametrize(
    ("argv", "env", "stdin", "path"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_fast_path_and_click_answer_alike(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
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

    fast = _run(["-m", "mailslot"], work, template, argv, env, stdin)
    slow = _run(["-c", _CLICK], work, template, argv, env, stdin)
    assert fast[0] == slow[0], (fast, slow)
    assert _same(fast[1]) == _same(slow[1])
    assert _same(fast[2]) == _same(slow[2])
    assert fast[3] == slow[3]
    if path == "usage":
        assert fast[0] == 2 and b"Usage: mailslot" in fast[2]
    if path == "fast" and fast[0] == 0 and ("send" in argv or "say" in argv):
        assert fast[3] != _tree(template)  # it did write something
