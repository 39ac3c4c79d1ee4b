"""Running external programs and git: bounded in time and output, never left behind, one error.

Real processes and real git throughout: a program that overruns has its whole process group
stopped, a flood of output is refused (not cut), an interrupt lets the program finish its step,
and git runs with the same environment whatever the caller's git settings are.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mailslot.core.command import run_command
from mailslot.core.errors import CommandFailed, MailslotError
from mailslot.core.git import git_env, run_git

ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (or is a zombie nobody reaped yet) within ``within`` s."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


# -- run_command --------------------------------------------------------------------------------


def test_output_status_and_input_round_trip() -> None:
    data = os.urandom(3 * 1024 * 1024)  # more than a pipe holds: input and output interleave
    done = run_command(["cat"], timeout=60, input=data)
    assert done.returncode == 0
    assert done.stdout == data
    text = run_command([sys.executable, "-c", "print('héllo')"], timeout=60)
    assert text.out == "héllo\n"


def test_a_failing_program_raises_with_its_last_error_line() -> None:
    script = (
        "import sys; print('first', file=sys.stderr); "
        "print('the reason', file=sys.stderr); sys.exit(3)"
    )
    with pytest.raises(CommandFailed) as e:
        run_command([sys.executable, "-c", script], timeout=60)
    assert isinstance(e.value, MailslotError)
    assert "status 3" in str(e.value) and "the reason" in str(e.value)
    assert e.value.result is not None and e.value.result.returncode == 3
    unchecked = run_command([sys.executable, "-c", script], timeout=60, check=False)
    assert unchecked.returncode == 3 and b"the reason" in unchecked.stderr


def test_a_missing_program_is_named() -> None:
    with pytest.raises(CommandFailed, match="no-such-program-here is not installed") as e:
        run_command(["no-such-program-here"], timeout=5)
    assert e.value.command == "no-such-program-here"


def test_the_program_runs_in_its_own_session() -> None:
    done = run_command([sys.executable, "-c", "import os; print(os.getsid(0))"], timeout=60)
    assert int(done.out) != os.getsid(0)


def test_an_overrun_stops_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # the shell leaves a grandchild holding the output pipe open, then waits on it
    script = f"sleep 300 & echo $! > {pidfile}; wait"
    with pytest.raises(CommandFailed, match=r"did not finish within 0\.5s") as e:
        run_command(["sh", "-c", script], timeout=0.5)
    assert e.value.timed_out
    assert _gone(int(pidfile.read_text()))


def test_a_grandchild_left_holding_the_pipe_is_stopped_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    with pytest.raises(CommandFailed) as e:
        run_command(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit 0"], timeout=0.5)
    assert e.value.timed_out
    assert _gone(int(pidfile.read_text()))


def test_output_past_its_bound_is_refused_and_the_program_stopped(tmp_path: Path) -> None:
    pidfile = tmp_path / "yes.pid"
    with pytest.raises(CommandFailed, match="more than 100000 bytes") as e:
        run_command(["sh", "-c", f"echo $$ > {pidfile}; exec yes"], timeout=60, max_output=100_000)
    assert e.value.result is None
    assert _gone(int(pidfile.read_text()))


_INTERRUPTED = """
import signal, sys
from pathlib import Path
from mailslot.core.command import run_command

def on_interrupt(signum, frame):
    Path(sys.argv[2]).touch()  # the interrupt is being acted on, inside run_command
    raise KeyboardInterrupt

signal.signal(signal.SIGINT, on_interrupt)
try:
    run_command(["sh", "-c", sys.argv[1]], timeout=60)
except KeyboardInterrupt:
    print("interrupted")
"""


def test_an_interrupt_lets_the_program_finish_its_step(tmp_path: Path) -> None:
    started, interrupted = tmp_path / "started", tmp_path / "interrupted"
    go, finished = tmp_path / "go", tmp_path / "finished"
    # The step runs until the test lets it end, so the interrupt always lands inside it.
    step = f"touch {started}; until [ -e {go} ]; do sleep 0.01; done; echo whole > {finished}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED, step, str(interrupted)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )

    def until(ready: Path) -> None:
        end = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, f"ended before {ready.name}"
            assert time.monotonic() < end, f"no {ready.name} within 60 s"
            time.sleep(0.005)

    until(started)
    proc.send_signal(signal.SIGINT)
    until(interrupted)  # the interrupt is being acted on while the step still runs
    assert not finished.exists()
    go.touch()
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "interrupted"  # the interrupt still goes on once the step is done
    assert finished.read_text() == "whole\n"  # the step it was in was not cut short


# -- git ---------------------------------------------------------------------------------------


def _repo(path: Path) -> Path:
    path.mkdir()
    run_git(path, "init", "-q")
    return path


_IDENTITY = ["user.name=t", "user.email=t@example.invalid"]


def test_git_runs_without_the_callers_git_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path / "repo")
    elsewhere = _repo(tmp_path / "elsewhere")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-commit").write_text("#!/bin/sh\necho hook ran >&2\nexit 1\n")
    (hooks / "pre-commit").chmod(0o755)
    user_config = tmp_path / "gitconfig"
    user_config.write_text(f"[core]\n\thooksPath = {hooks}\n[commit]\n\tgpgsign = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(user_config))
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))  # as inside another repo's hook
    monkeypatch.setenv("LANGUAGE", "de")
    (repo / "a.txt").write_text("a\n")
    run_git(repo, "add", "a.txt")
    run_git(repo, "commit", "-q", "-m", "first", config=_IDENTITY)
    assert run_git(repo, "log", "--format=%s").strip() == "first"
    with pytest.raises(CommandFailed, match="does not have any commits"):
        run_git(elsewhere, "log")  # the commit went into repo, not GIT_DIR's repository
    env = git_env()
    assert env["LC_ALL"] == "C" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert "GIT_DIR" not in env and "LANGUAGE" not in env


def test_nothing_planted_in_the_repository_runs_in_mailslots_git(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    ran = tmp_path / "ran"
    ran.mkdir()
    for hook in ("pre-commit", "prepare-commit-msg", "post-commit", "post-index-change"):
        path = repo / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {ran / hook}\n")
        path.chmod(0o755)
    with (repo / ".git" / "config").open("a") as f:
        f.write(f'[core]\n\tfsmonitor = "touch {ran / "fsmonitor"}; false"\n')
    (repo / "a.md").write_text("entry\n")
    run_git(repo, "status", "--porcelain")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "entry", config=_IDENTITY)
    assert run_git(repo, "log", "--format=%s").strip() == "entry"
    assert os.listdir(ran) == []
    # the same repository as a user's checkout runs them: the plants are live
    (repo / "b.md").write_text("entry\n")
    run_git(repo, "add", "-A", isolated=False)
    run_git(repo, "commit", "-q", "-m", "b", config=_IDENTITY, isolated=False)
    assert {"post-commit", "fsmonitor"} <= set(os.listdir(ran))


def test_a_filter_driver_planted_in_the_repository_runs_nothing(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    ran = tmp_path / "ran"
    ran.mkdir()
    drivers = {"plain": ' "plain"', "dotted": ".dotted", "quoted": ' "a \\"b\\" c"'}
    with (repo / ".git" / "config").open("a") as f:
        for name, header in drivers.items():
            f.write(f"[FILTER{header}]\n")
            for key in ("clean", "smudge", "process"):
                f.write(f'\t{key} = "touch {ran / name}-{key}; cat"\n')
            f.write("\trequired = true\n")
    names = ["plain", "dotted", 'a \\"b\\" c']
    (repo / ".gitattributes").write_text(
        "".join(f"{p} filter={n}\n" for p, n in zip(["p.md", "d.md", "q.md"], names, strict=True))
    )
    for p in ("p.md", "d.md", "q.md"):
        (repo / p).write_text("entry\n")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "entry", config=_IDENTITY)
    assert os.listdir(ran) == []
    for p in ("p.md", "d.md", "q.md"):
        (repo / p).write_text("changed\n")  # so the next add must filter them again
    with contextlib.suppress(CommandFailed):  # a shell as a process filter fails its protocol
        run_git(repo, "add", "-A", isolated=False)  # as a user's checkout: the drivers are live
    assert os.listdir(ran)
    # a config that pulls in another file cannot be checked: refused, nothing run
    with (repo / ".git" / "config").open("a") as f:
        f.write(f"[include]\n\tpath = {tmp_path / 'more'}\n")
    with pytest.raises(CommandFailed, match="includes other config files"):
        run_git(repo, "status")


def test_a_checkout_keeps_the_index_git_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / "staged.txt").write_text("s\n")
    other_index = tmp_path / "other-index"
    monkeypatch.setenv("GIT_INDEX_FILE", str(other_index))
    run_git(repo, "add", "staged.txt", isolated=False)  # as git commit's hook sees it
    assert run_git(repo, "diff", "--cached", "--name-only", isolated=False) == "staged.txt\n"
    assert run_git(repo, "diff", "--cached", "--name-only") == ""  # the repository's own index


def test_a_git_failure_names_the_subcommand_and_the_repository(tmp_path: Path) -> None:
    with pytest.raises(CommandFailed) as e:
        run_git(tmp_path, "status")
    assert str(e.value).startswith(f"{tmp_path}: git status failed: fatal: not a git repository")
    assert e.value.path == tmp_path


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to own a repository as another user")
def test_a_repository_another_user_owns_is_refused_in_one_line_that_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # no user config: nothing trusts the repository yet
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    repo = _repo(tmp_path / "their repo")
    subprocess.run(["chown", "-R", "nobody", str(repo)], check=True)
    with pytest.raises(CommandFailed) as e:
        run_git(repo, "status")
    message = str(e.value)
    assert "\n" not in message
    assert f"git refuses the repository at {repo}: it is owned by nobody (uid 65534)" in message
    command = message.split("run: ", 1)[1]
    assert command == f"git config --global --add safe.directory '{repo}'"
    subprocess.run(["sh", "-c", command], check=True)  # the advice, run as given
    assert run_git(repo, "status", "--porcelain") == ""  # trusted now, through the user config
    # the trust is the user's to give: a repository's own config cannot declare itself safe
    other = _repo(tmp_path / "other")
    run_git(other, "config", "safe.directory", str(other))
    subprocess.run(["chown", "-R", "nobody", str(other)], check=True)
    with pytest.raises(CommandFailed, match="owned by nobody"):
        run_git(other, "status")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run git in another user's repository")
def test_git_run_as_root_leaves_the_repository_its_owners_whatever_the_umask(
    tmp_path: Path,
) -> None:
    """The timer's tick: root, under ``UMask=0007``, in an exchange another user owns (``0750``).
    Everything git makes in ``.git`` is that user's, with no permission the exchange does not
    grant, and every directory of it stays the owner's to write."""
    repo = tmp_path / "theirs"
    repo.mkdir(mode=0o750)
    os.chmod(repo, 0o750)
    subprocess.run(["chown", "65534:65534", str(repo)], check=True)
    trust = [f"safe.directory={repo}", *_IDENTITY]
    old = os.umask(0o007)
    try:
        run_git(repo, "init", "-q", config=trust)
        for n in range(3):
            (repo / f"000{n}-olu.md").write_text(f"entry {n}\n")
            run_git(repo, "add", "-A", config=trust)
            run_git(repo, "commit", "-q", "-m", f"tick {n}", config=trust)
    finally:
        os.umask(old)
    strays = []
    for directory, dirs, files in os.walk(repo / ".git"):
        for name in dirs + files:
            st = os.lstat(os.path.join(directory, name))
            if (st.st_uid, st.st_gid) != (65534, 65534) or st.st_mode & 0o027:
                strays.append((name, st.st_uid, oct(st.st_mode)))
    assert strays == []
    # the owner can write every directory of it (its own git adds and renames there)
    assert all(os.stat(d).st_mode & 0o700 == 0o700 for d, _, _ in os.walk(repo / ".git"))


def test_a_repository_whose_top_its_owner_cannot_write_still_runs_git(tmp_path: Path) -> None:
    """The mode git gives what it makes follows the top directory's, but git refuses one its
    owner cannot write: a read-only top (an exchange frozen by ``chmod a-w``) still reads."""
    repo = _repo(tmp_path / "frozen")
    os.chmod(repo, 0o555)
    try:
        assert run_git(repo, "status", "--porcelain") == ""
    finally:
        os.chmod(repo, 0o755)


def test_a_git_that_overruns_is_stopped_with_its_children(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    pidfile = tmp_path / "nap.pid"
    nap = f"alias.nap=!echo $$ > {pidfile}; exec sleep 300"
    with pytest.raises(CommandFailed, match="git nap failed: git did not finish") as e:
        run_git(repo, "nap", config=[nap], timeout=1)
    assert e.value.timed_out
    assert _gone(int(pidfile.read_text()))


_STRUCK = """
import sys
from pathlib import Path
from mailslot.core.command import run_command
Path(sys.argv[1] + ".go").touch()
try:
    run_command(["sh", "-c", f"echo $$ > {sys.argv[1]}; sleep 0.3; echo done >> {sys.argv[1]}"],
                timeout=60)
except KeyboardInterrupt:
    pass
"""


def test_an_interrupt_at_any_instant_of_the_spawn_never_leaves_the_program_running(
    tmp_path: Path,
) -> None:
    rng = random.Random(16)
    for i in range(15):
        log, go = tmp_path / f"run-{i}", tmp_path / f"run-{i}.go"
        proc = subprocess.Popen(
            [sys.executable, "-c", _STRUCK, str(log)],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            stderr=subprocess.DEVNULL,
        )
        end = time.monotonic() + 30
        while not go.exists() and time.monotonic() < end:
            time.sleep(0.0005)
        time.sleep(rng.uniform(0, 0.004))  # around the spawn
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        if log.exists():  # it was started: mailslot waited for it to end before exiting
            assert log.read_text().split()[-1] == "done", i
