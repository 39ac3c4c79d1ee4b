"""The one-way boundary: can each side's agent write its outbox, and is it kept out of its inbox?

Where the agent's systemd service has ``ProtectSystem=strict`` + ``ReadWritePaths=`` its
outbox only, the sandbox is the real boundary and symmetric ``2770`` modes are safe; where it has no
sandbox, Unix modes are the *entire* enforcement and must be asymmetric. Either way the boundary is
verified both ways, live: as the side's own user, creating a file in its outbox must succeed and in
its inbox must fail. Run as root, ``probe_as`` does exactly that in a forked child that drops to the
user (``initgroups`` + ``setgid`` + ``setuid``), with dot-named probe files readers ignore and that
are removed at once. Without root it falls back to reading the modes, owner and group.

A sandbox is read from the unit text (``systemctl cat``, else the unit files and drop-ins), so the
verdict works on a host where systemd is not running too.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from mailslot.core.command import run_command
from mailslot.core.errors import CommandFailed

__all__ = [
    "UNIT_DIRS",
    "Sandbox",
    "Writable",
    "parse_unit",
    "probe_as",
    "static_writable",
    "unit_text",
    "user_of",
]

UNIT_DIRS = (
    Path("/etc/systemd/system"),
    Path("/run/systemd/system"),
    Path("/usr/local/lib/systemd/system"),
    Path("/lib/systemd/system"),
    Path("/usr/lib/systemd/system"),
)


def user_of(name: str) -> pwd.struct_passwd | None:
    """The Unix account ``name``, or ``None`` if there is none."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _groups(user: pwd.struct_passwd) -> set[int]:
    gids = {user.pw_gid}
    for g in grp.getgrall():
        if user.pw_name in g.gr_mem:
            gids.add(g.gr_gid)
    return gids


@dataclass(frozen=True)
class Writable:
    """Whether a user could create a file in a directory, and how that was found out."""

    path: Path
    writable: bool
    how: str  # "live" (tried as the user) or "modes" (read from owner, group and mode)
    detail: str = ""


def static_writable(user: pwd.struct_passwd, path: Path) -> Writable:
    """Whether ``user`` may create files in ``path`` according to its owner, group and mode."""
    try:
        st = path.stat()
    except OSError as e:
        return Writable(path, False, "modes", f"cannot stat: {e.strerror}")
    mode = stat.S_IMODE(st.st_mode)
    if user.pw_uid == 0:
        return Writable(path, True, "modes", "root")
    if st.st_uid == user.pw_uid:
        ok, who = bool(mode & 0o300 == 0o300), "owner"
    elif st.st_gid in _groups(user):
        ok, who = bool(mode & 0o030 == 0o030), "group"
    else:
        ok, who = bool(mode & 0o003 == 0o003), "other"
    return Writable(path, ok, "modes", f"as {who}, mode {mode:04o}")


def probe_as(user: pwd.struct_passwd, paths: list[Path]) -> list[Writable]:
    """Try to create (then remove) a dot-named file in each of ``paths`` as ``user``; root only.

    Raises ``PermissionError`` when not running as root (the caller falls back to the modes).
    """
    if os.geteuid() != 0:
        raise PermissionError("live probe needs root")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop to the user, try, report, exit without running any cleanup
        code = 0
        try:
            os.close(r)
            os.initgroups(user.pw_name, user.pw_gid)
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            out = []
            for p in paths:
                probe = p / f".mailslot-doctor-{os.getpid()}.tmp"
                try:
                    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                except OSError as e:
                    out.append(e.strerror or "refused")
                    continue
                os.close(fd)
                try:
                    os.unlink(probe)
                except OSError:
                    pass
                out.append("")
            os.write(w, json.dumps(out).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    try:
        results = json.loads(b"".join(chunks))
    except ValueError:
        raise PermissionError(f"could not switch to user {user.pw_name}") from None
    return [
        Writable(p, res == "", "live", res or "created and removed a probe file")
        for p, res in zip(paths, results, strict=True)
    ]


def unit_text(unit: str) -> str | None:
    """The unit's text with drop-ins (``systemctl cat``, else the unit directories), or ``None``."""
    if shutil.which("systemctl"):
        try:
            proc = run_command(["systemctl", "cat", "--no-pager", "--", unit], timeout=15)
            if proc.out.strip():
                return proc.out
        except CommandFailed:
            pass  # not loaded, or systemd not running: read the unit directories
    for d in UNIT_DIRS:
        path = d / unit
        if path.is_file():
            parts = [path.read_text(errors="replace")]
            dropins = d / f"{unit}.d"
            if dropins.is_dir():
                parts += [p.read_text(errors="replace") for p in sorted(dropins.glob("*.conf"))]
            return "\n".join(parts)
    return None


@dataclass
class Sandbox:
    """The sandbox settings of a service's ``[Service]`` section that make a one-way boundary."""

    protect_system: str | None = None
    read_write: list[Path] = field(default_factory=list)
    user: str | None = None

    @property
    def strict(self) -> bool:
        """Whether everything outside ``ReadWritePaths=`` is read-only."""
        return self.protect_system == "strict"

    def allows(self, path: Path) -> bool:
        """Whether the sandbox lets the service write somewhere in or at ``path``."""
        if not self.strict:
            return True
        return any(p == path or p in path.parents or path in p.parents for p in self.read_write)


def parse_unit(text: str) -> Sandbox:
    """The ``[Service]`` sandbox settings of a unit text (later assignments win; empty resets)."""
    sb = Sandbox()
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, _, value = (s.strip() for s in line.partition("="))
        if key == "ProtectSystem":
            sb.protect_system = value.lower() or None
            if sb.protect_system in ("yes", "true", "1"):
                sb.protect_system = "true"
        elif key == "ReadWritePaths":
            if not value:
                sb.read_write = []
            for item in value.split():
                sb.read_write.append(Path(item.lstrip("-+").strip('"')))
        elif key == "User":
            sb.user = value or None
    return sb
