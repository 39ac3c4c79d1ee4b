import pytest

from mailslot.core.errors import InvalidName
from mailslot.core.names import split_topic, validate_agent, validate_slug, validate_topic


@pytest.mark.parametrize("name", ["claude", "olu", "a", "kiran-48291", "w1", "a_b", "x" * 40])
def test_valid_agent_names(name: str) -> None:
    assert validate_agent(name) == name


@pytest.mark.parametrize(
    "name", ["", "Claude", "-x", "_x", "a/b", "..", "a..b/", "a\nb", "a\x00b", "x" * 41, "\u00e9"]
)
def test_invalid_agent_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidName) as e:
        validate_agent(name)
    assert e.value.kind == "agent name"


@pytest.mark.parametrize("slug", ["gate-bug", "a", "x" * 64, "0day"])
def test_valid_slugs(slug: str) -> None:
    assert validate_slug(slug) == slug


@pytest.mark.parametrize("slug", ["", "Gate", "-a", "a_b", "a/b", "..", "x" * 65, "a b"])
def test_invalid_slugs(slug: str) -> None:
    with pytest.raises(InvalidName):
        validate_slug(slug)


def test_topic_has_a_real_date() -> None:
    assert split_topic("2026-11-29-gate-bug") == ("2026-11-29", "gate-bug")
    with pytest.raises(InvalidName, match="calendar"):
        validate_topic("2026-02-30-x")
    for bad in ["gate-bug", "2026-11-29", "2026-11-29-", "2026-11-29-../x", "26-11-29-x"]:
        with pytest.raises(InvalidName):
            validate_topic(bad)


def test_only_ascii_digits() -> None:
    for bad in ["\uff12\uff10\uff12\uff16-\uff11\uff11-\uff13\uff10-x", "2026-11-3\u0660-x"]:
        with pytest.raises(InvalidName):
            validate_topic(bad)


def test_numbering_ignores_non_ascii_digits(tmp_path) -> None:
    from mailslot.core.fsio import highest_number

    (tmp_path / "\uff10\uff10\uff10\uff19-olu.md").write_text("x")
    (tmp_path / "0002-olu.md").write_text("x")
    assert highest_number([tmp_path]) == 2


def test_time_needs_ascii_digits() -> None:
    from mailslot.core.clock import parse_time
    from mailslot.core.errors import FormatError

    with pytest.raises(FormatError):
        parse_time("\uff12\uff10\uff12\uff16-09-01T18:14:00Z")


def test_limit_messages_read_well() -> None:
    from mailslot.core.errors import LimitExceeded
    from mailslot.core.limits import check_chars, check_one_line

    with pytest.raises(LimitExceeded, match=r"^text is 2 lines; at most 1 line allowed$"):
        check_one_line("text", "a\nb")
    with pytest.raises(LimitExceeded, match=r"^agent is 1 character; it must be at least 2 "):
        check_chars("agent", "a", 2, 40)
