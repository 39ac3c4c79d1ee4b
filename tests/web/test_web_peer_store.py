"""What the inbox writes for a message: the record's exact text, whatever the strings hold."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from mailslot.web.peer import record_text

# Text as the payload check lets it through: any code point but a lone surrogate.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)))


@given(sender=TEXT, subject=st.none() | TEXT, body=TEXT, received_at=TEXT)
def test_record_text_is_json_dumps_with_indent_1_byte_for_byte(
    sender: str, subject: str | None, body: str, received_at: str
) -> None:
    record = {"from": sender, "subject": subject, "body": body, "received_at": received_at}
    expected = json.dumps(record, ensure_ascii=False, indent=1) + "\n"
    assert record_text(sender, subject, body, received_at) == expected
    assert json.loads(expected) == record
