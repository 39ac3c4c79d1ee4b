"""Helpers for exchange tests (a module, not the conftest, so it imports unambiguously)."""

from __future__ import annotations

from pathlib import Path


def write_by_hand(path: Path, text: str, *, crlf: bool = False) -> Path:
    """Write a file the way a foreign agent would: plain open/write, maybe CRLF."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.replace("\n", "\r\n") if crlf else text
    path.write_bytes(data.encode())
    return path
