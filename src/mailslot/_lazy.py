"""Package attributes that load on first use (PEP 562), for packages every command imports.

``mailslot`` and ``mailslot.exchange`` re-export names from their modules; importing those
modules up front would make every command pay for all of them on every start.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `--help` loads this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: dict[str, str], public: Iterable[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: a name in ``where`` is imported from
    ``package.<where[name]>`` on first use and kept; any other name raises ``AttributeError``."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # later lookups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__
