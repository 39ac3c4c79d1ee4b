"""Named records for the modules a one-shot command imports on every start.

``dataclasses`` loads ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``), and each
``@dataclass`` compiles its generated methods when its module is imported: together a quarter of
an ``exchange send``'s start-up. A record on that path instead names its fields, in order, in
``__match_args__`` (as a dataclass does; ``__slots__`` holds the same names, sorted) and writes
its ``__init__``; ``Record`` gives it what a dataclass would (a ``repr`` naming every field,
equality field by field with records of the same class, no hash, ``copy`` and ``pickle``) and
``FrozenRecord`` what a ``frozen=True`` one would (assignment refused with ``AttributeError``,
as ``dataclasses.FrozenInstanceError`` is one, and a hash of the fields).

What it does not give: ``dataclasses.replace``, ``fields`` and ``asdict`` do not take these
records, so a record that others copy with ``replace`` stays a dataclass (off the start-up path).
"""

from __future__ import annotations

__all__ = ["FrozenRecord", "Record"]


class Record:
    """A record whose fields are named, in order, by its ``__match_args__``."""

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__qualname__}({fields})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # a mutable record is unhashable, as a dataclass

    def __setstate__(self, state: tuple[object, dict[str, object]]) -> None:
        # ``copy`` and ``pickle`` restore slots through this (a frozen record refuses setattr)
        for name, value in state[1].items():
            object.__setattr__(self, name, value)


class FrozenRecord(Record):
    """A record set once, in ``__init__`` (through ``object.__setattr__``), then never."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen record")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen record")

    def __hash__(self) -> int:  # type: ignore[override]  # a frozen one hashes, as a dataclass
        return hash(self._values())
