"""systemd units mailslot writes: one renderer, one hardening set, values that cannot inject.

Every ``install`` command (the exchange tick, the peer inbox and the board, the bridge) renders
its service through ``service_unit`` and writes it with ``write_unit``, so every unit gets the same
sandbox (``hardening``):

* The filesystem is read-only (``ProtectSystem=strict``) except the paths the service must write
  (``ReadWritePaths=``); home directories are hidden, or read-only where something the service
  reads or writes lives under one; /dev is private; /tmp is private unless a written path is under
  it (a private /tmp would hide that path's writes from everyone else).
* No new privileges, no kernel tunables, modules, logs, clock or hostname, no namespaces, no
  realtime, no writable-and-executable memory, only inet and unix sockets, native system calls of
  the ``@system-service`` set.
* A server (``unprivileged``: it runs as its own user and needs no privilege) also has no
  capabilities at all, cannot see other users' processes, set set-uid/set-gid bits or make
  privileged system calls. The exchange tick is not such a service: run as root it writes both
  sides' folders (owned by each side's user), keeps their set-group-id bit and must see every
  ``git`` process to judge a stale index lock, so it keeps its capabilities and the process list.

Values go into the unit verbatim, so ``unit_arg`` refuses quotes, backslashes and line breaks,
escapes ``%`` and ``$`` (systemd's specifiers and variables) and quotes a value with spaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mailslot.core.errors import FormatError
from mailslot.core.fsio import atomic_write

__all__ = [
    "UNIT_DIR",
    "hardening",
    "render_unit",
    "service_unit",
    "unit_arg",
    "write_unit",
]

UNIT_DIR = Path("/etc/systemd/system")
_HOME_DIRS = (Path("/home"), Path("/root"), Path("/run/user"))
_TMP_DIRS = (Path("/tmp"), Path("/var/tmp"))

# Every unit, whoever it runs as.
_EVERY = (
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
)
_KERNEL = (
    "PrivateDevices=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
    "RestrictNamespaces=yes",
    "RestrictRealtime=yes",
    "LockPersonality=yes",
    "MemoryDenyWriteExecute=yes",
    "SystemCallArchitectures=native",
    "SystemCallFilter=@system-service",
)
# A service that runs as its own unprivileged user and needs no privilege at all.
_UNPRIVILEGED = (
    "ProtectProc=invisible",
    "ProcSubset=pid",
    "RestrictSUIDSGID=yes",
    "RemoveIPC=yes",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "SystemCallFilter=~@privileged @resources",
)


def unit_arg(value: str | Path) -> str:
    """``value`` as a unit holds it (``%``/``$`` escaped, quoted if it has spaces);
    ``FormatError`` for a quote, backslash, line break or NUL."""
    text = str(value)
    if any(c in text for c in "\"'\\\n\r\0"):
        raise FormatError(f"cannot be put in a systemd unit safely: {text!r}")
    text = text.replace("%", "%%").replace("$", "$$")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def _under(path: Path, dirs: Sequence[Path]) -> bool:
    return any(path == d or d in path.parents for d in dirs)


def hardening(
    writable: Sequence[Path],
    *,
    reads: Sequence[Path] = (),
    unprivileged: bool = True,
    umask: str = "0027",
    private_tmp: bool | None = None,
) -> list[str]:
    """The sandbox lines (see the module docstring) for a service writing only ``writable``.

    ``reads``: paths it must read (its interpreter, its config), which keep a home directory
    visible. ``private_tmp`` forces /tmp private or not; by default it is private unless a
    writable path is under /tmp or /var/tmp. ``FormatError`` for a path a unit cannot hold.
    """
    # ProtectHome=yes hides /home entirely, which would hide a venv or data kept there; then
    # fall back to read-only, and the writable paths are re-opened by ReadWritePaths.
    home = "read-only" if any(_under(p, _HOME_DIRS) for p in (*writable, *reads)) else "yes"
    if private_tmp is None:
        private_tmp = not any(_under(p, _TMP_DIRS) for p in writable)
    lines = [
        *_EVERY,
        f"ProtectHome={home}",
        *(f"ReadWritePaths={unit_arg(p)}" for p in writable),
        "PrivateTmp=yes" if private_tmp else "PrivateTmp=no",
        *_KERNEL,
    ]
    if unprivileged:
        lines += _UNPRIVILEGED
    lines.append(f"UMask={umask}")
    return lines


def render_unit(
    sections: Sequence[tuple[str, Sequence[str]]], *, comments: Sequence[str] = ()
) -> str:
    """A unit file: ``# comment`` lines, then each ``[Section]`` with its ``Key=value`` lines."""
    out = [f"# {c}" if c else "#" for c in comments]
    for i, (name, lines) in enumerate(sections):
        if i:
            out.append("")
        out.append(f"[{name}]")
        out.extend(lines)
    return "\n".join(out) + "\n"


def service_unit(
    description: str,
    argv: Sequence[str],
    sandbox: Sequence[str],
    *,
    after: Sequence[str] = ("network-online.target",),
    service: Sequence[str] = (),
    wanted_by: str | None = "multi-user.target",
    comments: Sequence[str] = (),
) -> str:
    """A ``.service``: ``argv`` as ``ExecStart`` (each word through ``unit_arg``), ``service``
    lines (``Type=``, ``User=``, ...) before the ``sandbox`` (from ``hardening``), and an
    ``[Install]`` section when ``wanted_by`` is given. ``FormatError`` for an unsafe value."""
    unit = [f"Description={description}"]
    if after:
        unit.append(f"After={' '.join(after)}")
        if "network-online.target" in after:
            unit.append("Wants=network-online.target")
    exec_start = " ".join(unit_arg(a) for a in argv)
    sections: list[tuple[str, Sequence[str]]] = [
        ("Unit", unit),
        ("Service", [*service, f"ExecStart={exec_start}", *sandbox]),
    ]
    if wanted_by:
        sections.append(("Install", [f"WantedBy={wanted_by}"]))
    return render_unit(sections, comments=comments)


def write_unit(text: str, name: str, unit_dir: Path = UNIT_DIR) -> Path:
    """Write unit ``name`` into ``unit_dir`` (replacing an older one, atomically, mode 0644);
    its path. ``OSError`` when the directory is not writable."""
    path = Path(unit_dir) / name
    atomic_write(path, text, mode=0o644)
    return path
