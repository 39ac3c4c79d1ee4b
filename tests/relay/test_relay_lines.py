"""The one-line turn format: strict parse, lines hand-written from the templates, exact ids."""

from __future__ import annotations

import pytest

from mailslot.core.errors import FormatError
from mailslot.relay.lines import format_line, parse_inbox, parse_line


def test_a_manager_reply_as_the_template_writes_it() -> None:
    t = parse_line("- [14:02] (manager) id=R01 T1=1722868961456 say=Friday, if tests pass.")
    assert (t.kind, t.id, t.author, t.hhmm) == ("turn", "R01", "manager", "14:02")
    assert t.ms("T1") == 1722868961456 and t.say == "Friday, if tests pass."


def test_a_worker_line_in_the_templates_shell_pattern() -> None:
    t = parse_line("- [14:01] (w1) C01 id=C01 T0=1722868950123 — Human says: when do we ship?")
    assert (t.id, t.ms("T0"), t.say) == ("C01", 1722868950123, "when do we ship?")


def test_an_id_inside_say_is_text_not_an_id() -> None:
    t = parse_line("- [14:02] (manager) id=R01 T1=1 say=not id=R09 and not R09")
    assert t.id == "R01" and t.say == "not id=R09 and not R09"


@pytest.mark.parametrize(
    "line",
    [
        "timing: R01 took 2 ms",  # a diagnostic
        "- [14:02] (manager) note: R01 took 2 ms",
        "- [14:02] (manager) id=R01 say=no T1",
        "- [14:02] (manager) id=R01 T1=1",  # no say
        "- [14:02] (manager) id=R01 T1=1 say=   ",
        "- [14:02] (manager) id=X01 T1=1 say=bad id",
        "- [14:02] (manager) id=R01 id=R02 T1=1 say=twice",
        "- [14:02] (manager) id=R01 ack=R01 T1=1 say=two heads",
        "- [14:02] (manager) id=R01 T1=soon say=bad stamp",
        "- [14:02] (Manager) id=R01 T1=1 say=uppercase name",
        "- [14:02] (w1) C02 id=C01 T0=1 say=label mismatch",
        "- [14:02] (manager) id=R01 T1=1 say=two\nlines",
        "- [14:02] (manager) id=R01 T1=1 say=carriage\rreturn",
    ],
)
def test_malformed_lines_are_refused(line: str) -> None:
    with pytest.raises(FormatError):
        parse_line(line)


def test_format_line_round_trips_and_refuses_what_would_not_parse() -> None:
    line = format_line("09:05", "w1", "ack=R03", {"T0": 1, "T1": 2, "T2": 3}, flags=("RECOVERED",))
    assert line == "- [09:05] (w1) ack=R03 T0=1 T1=2 T2=3 RECOVERED"
    t = parse_line(line)
    assert (t.kind, t.id, t.flags) == ("ack", "R03", frozenset({"RECOVERED"}))
    with pytest.raises(FormatError):
        format_line("09:05", "manager", "id=R01", {"T1": 1}, say="a\nb")


def test_parse_inbox_skips_strays_and_keeps_offsets() -> None:
    good = "- [14:02] (manager) id=R01 T1=5 say=hi\n"
    data = ("# heading\n" + good + "diagnostic line\n" + "- [14:03] (manager) id=R0").encode()
    lines, bad = parse_inbox(data, 100)
    assert [t.id for t in lines] == ["R01"] and bad == 2  # the partial last line waits
    assert lines[0].offset == 100 + len("# heading\n")
