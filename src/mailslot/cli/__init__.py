"""The ``mailslot`` command line (``mailslot.cli.command``: the click group, its global options,
errors -> exit codes).

This package loads nothing itself: ``mailslot.cli.quick`` runs the commands agents call most
(``exchange send``, ``chat say``, ``exchange watch``, ``chat wait``, ``relay ask``, ``outbox
take``) without loading click, and a module of this package must be importable without pulling
the click group in. ``cli``, ``main`` and every other name of ``mailslot.cli.command`` are still
read from here (``from mailslot.cli import cli``); the first such read loads the group.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from mailslot.cli.command import cli, main

__all__ = ["cli", "main"]


def __getattr__(name: str) -> Any:
    # import_module, not ``from mailslot.cli import command``: that asks this package for the
    # attribute first, and so would come back here. A submodule not loaded yet is not found
    # on ``command`` and is then imported as usual.
    import importlib

    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return getattr(importlib.import_module("mailslot.cli.command"), name)
    except AttributeError:
        raise AttributeError(f"module 'mailslot.cli' has no attribute {name!r}") from None
