"""Named records for the modules a one-shot command imports on every start.

``dataclasses`` loads ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``), and each
``@dataclass`` compiles its generated methods when its module is imported: together a quarter of
an ``exchange send``'s start-up. A record on that path instead names its fields, in order, in
``__match_args__`` (as a dataclass does; ``__slots__`` holds the same names, sorted) and writes
its ``__init__``; ``Record`` gives it what a dataclass would (a ``repr`` naming every field,
equality field by field with records of the same class, no hash, ``copy`` and ``pickle``) and
``FrozenRecord`` what a ``frozen=True`` one would (assignment refused with ``AttributeError``,
as ``dataclasses.FrozenInstanceError`` is one, and a hash of the fields).

A record copied with changes uses its own ``replace(**changes)`` (``dataclasses.replace`` does
not take these records, nor do ``fields`` and ``asdict``): a new one made through ``__init__``.
A record without ``__slots__`` of its own keeps its fields in an instance ``__dict__``, which a
hot path may fill in one ``dict.update`` where a test holds that to what ``__init__`` makes.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Self

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

    def _asdict(self) -> dict[str, object]:
        """The fields by name, in order (as a named tuple's ``_asdict``; values as they are)."""
        return {name: getattr(self, name) for name in self.__match_args__}

    def replace(self, **changes: object) -> Self:
        """A new record of this class with ``changes`` over these fields, made by ``__init__``
        (as ``dataclasses.replace`` makes one); ``TypeError`` for a name that is no field."""
        unknown = changes.keys() - set(self.__match_args__)
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {sorted(unknown)[0]!r}")
        values = self._asdict()
        values.update(changes)
        return type(self)(**values)

    def __setstate__(self, state: dict[str, object] | tuple[object, dict[str, object]]) -> None:
        # ``copy`` and ``pickle`` restore fields through this (a frozen record refuses setattr):
        # a record with slots hands ``(None, slots)``, one without its ``__dict__``
        fields = state[1] if isinstance(state, tuple) else state
        for name, value in (fields or {}).items():
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
