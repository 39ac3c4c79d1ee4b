"""The public API is ``mailslot.__all__``: everything listed exists, nothing private leaks."""

import mailslot
import mailslot.errors


def test_all_exports_exist() -> None:
    for name in mailslot.__all__:
        assert hasattr(mailslot, name), name


def test_public_names_are_exported() -> None:
    for name in mailslot.__all__:  # the names load on first use: resolve every one first
        getattr(mailslot, name)
    assert set(mailslot.__all__) <= set(dir(mailslot))
    public = {n for n in vars(mailslot) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(mailslot, n)).__name__ == "module"}
    assert public - modules == set(mailslot.__all__) - {"__version__"}


def test_error_tree() -> None:
    assert all(
        issubclass(getattr(mailslot.errors, n), mailslot.MailslotError)
        for n in mailslot.errors.__all__
    )
    assert mailslot.WaitTimeout.exit_code == 3 and mailslot.Gone.exit_code == 4


def test_a_module_that_offers_another_modules_names_on_first_use_offers_all_of_them() -> None:
    """``exchange.entries`` offers ``exchange.entry``'s readers without importing it up front:
    every name ``entry`` exports, and only those, resolves through ``entries``."""
    from mailslot.exchange import entries, entry

    assert set(entry.__all__) == entries._READERS
    for name in entry.__all__:
        assert getattr(entries, name) is getattr(entry, name), name
        assert name in entries.__all__, name
