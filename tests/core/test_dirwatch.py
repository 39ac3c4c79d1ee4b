"""DirWatch names what changed; being_written tells a file still open for writing."""

from __future__ import annotations

import os
import subprocess
import sys

from mailslot.core.dirwatch import DirWatch, being_written
from mailslot.core.fsio import atomic_create


def test_changes_name_the_file_and_a_new_folder(tmp_path) -> None:
    watch = DirWatch()
    assert watch.available and watch.add(tmp_path)
    atomic_create(tmp_path / "0001-a.md", "hello\n")
    (tmp_path / "topic").mkdir()
    changes = watch.read()
    names = {(c.name, c.is_dir) for c in changes if not c.gone and not c.name.startswith(".")}
    assert ("0001-a.md", False) in names and ("topic", True) in names
    os.unlink(tmp_path / "0001-a.md")
    assert any(c.name == "0001-a.md" and c.gone for c in watch.read())
    watch.close()


def test_a_file_held_open_by_its_writer_is_being_written(tmp_path) -> None:
    path = tmp_path / "0001-a.md"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"f = open({str(path)!r}, 'w'); f.write('half'); f.flush(); input()",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        while not path.exists() or not path.stat().st_size:
            pass
        assert being_written(path) is True
    finally:
        writer.communicate(b"\n", timeout=10)
    assert being_written(path) is False
    atomic_create(tmp_path / "0002-a.md", "whole\n")
    assert being_written(tmp_path / "0002-a.md") is False
