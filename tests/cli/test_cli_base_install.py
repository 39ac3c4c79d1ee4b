"""A plain `pip install mailslot` (no extras): what needs an extra says which, in one line.

The install is real: a fresh venv (no pip, no system site-packages) that sees only this source
tree and the three base dependencies (click, PyYAML, inotify_simple), linked from the test venv.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
BASE_DEPS = ("click", "yaml", "_yaml", "inotify_simple")

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def base_install(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``run(*args)``: ``python -m mailslot ARGS`` in a venv holding only the base install."""
    home = tmp_path_factory.mktemp("base-install")
    venv = home / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = home / "deps"
    deps.mkdir()
    for name in BASE_DEPS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue  # _yaml is optional (PyYAML's C speedups)
        origin = Path(spec.origin)
        target = origin.parent if spec.submodule_search_locations else origin
        (deps / target.name).symlink_to(target)
    # what `pip install -e .` would add: the source tree, and here the base dependencies
    (Path(site) / "mailslot-base.pth").write_text(f"{SRC}\n{deps}\n")
    probe = subprocess.run(
        [str(python), "-c", "import anyio"], capture_output=True, text=True, check=False
    )
    assert probe.returncode != 0, "the base venv must not see the extras"
    assert sysconfig.get_paths()["purelib"] != site

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "mailslot", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            cwd=home,
            timeout=60,
        )

    return run


@pytest.fixture
def exchange(base_install: Run, tmp_path: Path) -> Path:
    root = tmp_path / "ex"
    r = base_install("exchange", "init", str(root), "--side", "claude", "--side", "olu", "--no-git")
    assert r.returncode == 0, r.stderr  # the base install runs the file channels
    return root


def _one_line_naming(r: subprocess.CompletedProcess[str], extra: str) -> None:
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("mailslot: error: "), r.stderr
    assert f"pip install 'mailslot[{extra}]'" in r.stderr


def test_mcp_names_the_mcp_extra(base_install: Run, exchange: Path) -> None:
    _one_line_naming(base_install("mcp", "--root", str(exchange), "--as", "claude"), "mcp")
    # said before anything else is asked for: no --as or --root can make this install serve
    _one_line_naming(base_install("mcp"), "mcp")


def test_onboard_prints_no_registration_for_a_server_that_cannot_start(
    base_install: Run, exchange: Path
) -> None:
    r = base_install("onboard", "claude-code", "--root", str(exchange), "--as", "claude")
    _one_line_naming(r, "mcp")
    assert r.stdout == ""


@pytest.mark.parametrize("server", ["peer", "board"])
def test_servers_name_the_web_extra(base_install: Run, tmp_path: Path, server: str) -> None:
    r = base_install("--root", str(tmp_path), server, "serve", "--bind", "127.0.0.1:0")
    _one_line_naming(r, "web")


def test_peer_send_names_the_web_extra(base_install: Run, tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    r = base_install(
        "peer", "send", "beacon", "hello", "--keys", str(keys), input="mst_not-a-real-token\n"
    )
    _one_line_naming(r, "web")
