"""The error tree: the drawing in ``core/errors.py`` is the tree the code defines, and nothing
raises the base class itself.

A script acts on an error by its class and exit code, so every class mailslot raises must be a
named kind in one documented tree: a bare ``MailslotError("...")`` is a failure nobody can tell
apart from any other, and a class missing from the drawing is one nobody knows to expect.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import mailslot
import mailslot.core.errors as core_errors
import mailslot.errors
from mailslot.core.errors import MailslotError

SRC = Path(mailslot.__file__).resolve().parent

_LINE = re.compile(r"^    (?P<indent>(?:\|   |    )*)\+-- (?P<name>\w+)(?P<rest>.*)$")


def _drawing() -> dict[str, tuple[str, str]]:
    """``{class name: (parent name, the line's description)}`` from the module docstring."""
    doc = core_errors.__doc__ or ""
    assert "    MailslotError " in doc
    drawn: dict[str, tuple[str, str]] = {}
    path = ["MailslotError"]
    for line in doc.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        depth = len(m["indent"]) // 4
        del path[depth + 1 :]
        assert len(path) == depth + 1, f"a branch without its parent: {line!r}"
        assert m["name"] not in drawn, f"drawn twice: {m['name']}"
        drawn[m["name"]] = (path[depth], m["rest"].strip())
        path.append(m["name"])
    return drawn


def _all_error_classes() -> dict[str, type[MailslotError]]:
    for info in pkgutil.walk_packages([str(SRC)], "mailslot."):
        if info.name != "mailslot.__main__":
            importlib.import_module(info.name)
    found: dict[str, type[MailslotError]] = {}
    todo = [MailslotError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("mailslot."):
                assert sub.__name__ not in found, f"two error classes named {sub.__name__}"
                found[sub.__name__] = sub
                todo.append(sub)
    return found


def test_every_error_class_is_drawn_under_its_parent() -> None:
    drawn = _drawing()
    classes = _all_error_classes()
    missing = sorted(set(classes) - set(drawn))
    assert not missing, f"error classes missing from the drawing in core/errors.py: {missing}"
    stale = sorted(set(drawn) - set(classes))
    assert not stale, f"the drawing names classes that do not exist: {stale}"
    for name, cls in classes.items():
        assert drawn[name][0] == cls.__bases__[0].__name__, (
            f"{name} is drawn under the wrong parent"
        )


def test_the_drawn_exit_codes_are_the_classes_exit_codes() -> None:
    """A line says ``exit N`` where the code differs from its parent's; otherwise it inherits."""
    classes = _all_error_classes()
    drawn = _drawing()
    code = {"MailslotError": 1}
    for name, (parent, said) in drawn.items():  # parents are drawn before their children
        m = re.search(r"\bexit (\d+)", said)
        code[name] = int(m[1]) if m else code[parent]
        assert classes[name].exit_code == code[name], name


def test_the_drawing_names_the_module_of_each_class_outside_core() -> None:
    classes = _all_error_classes()
    for name, (_, said) in _drawing().items():
        module = classes[name].__module__
        if module == "mailslot.core.errors":
            assert not said.startswith("("), f"{name} lives in core but is drawn with a module"
        else:
            drawn = re.match(r"\(([\w.]+)\)", said)
            assert drawn, f"{name} lives in {module}: draw it with its module"
            assert f"mailslot.{drawn[1]}" == module, f"{name} lives in {module}, not {drawn[1]}"


def test_the_public_alias_exports_every_class_of_the_tree() -> None:
    assert mailslot.errors.__all__ == core_errors.__all__
    for name in core_errors.__all__:
        assert getattr(mailslot.errors, name) is getattr(core_errors, name)
    defined = {
        n
        for n, v in vars(core_errors).items()
        if isinstance(v, type) and issubclass(v, MailslotError)
    }
    assert defined == set(core_errors.__all__)


def _bare_constructions(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "MailslotError")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "MailslotError")
        )
    ]


def test_nothing_raises_the_base_class_itself() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        found += [f"src/mailslot/{rel}:{line}" for line in _bare_constructions(path)]
    assert not found, "MailslotError(...) raised itself; raise a leaf of the tree:\n" + "\n".join(
        found
    )


def test_the_scan_finds_a_bare_raise(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from mailslot.core import errors\n"
        "def f():\n"
        "    raise errors.MailslotError('x')\n"
        "def g():\n"
        "    raise MailslotError('y') from None\n"
        "def h():\n"
        "    raise NotFound('z')\n"
    )
    assert _bare_constructions(sample) == [3, 5]


@pytest.mark.parametrize(
    "cls, message",
    [
        (core_errors.AlreadyWritten, "the line WAS written"),
        (core_errors.CannotOpen, "cannot read the body file: Permission denied"),
        (core_errors.InvalidValue, "log text is empty"),
    ],
)
def test_a_leaf_says_its_message_and_path(cls: type[MailslotError], message: str) -> None:
    e = cls(message, path="/x/LOG.md")
    assert str(e) == f"/x/LOG.md: {message}" and e.exit_code == 1 and e.path == Path("/x/LOG.md")
