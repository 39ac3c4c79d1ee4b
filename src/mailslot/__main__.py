"""The ``mailslot`` command's entry point: ``python -m mailslot`` and the console script.

It runs the command line (``mailslot.cli.main``), which owns the process and ends every run
through ``core.ending``.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run ``mailslot`` with ``argv`` (default: the process's arguments) and end the process."""
    from mailslot.cli import main as run

    run(argv)


if __name__ == "__main__":
    main()
