"""The values a channel and its faces share live in one module that imports nothing of mailslot's
channels, and each side reads them from there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mailslot import defaults
from mailslot.mcpserver import search_tools
from mailslot.search import find


def test_the_shared_values_load_without_any_channel_or_third_party_module() -> None:
    code = (
        "import sys, json; before = set(sys.modules); import mailslot.defaults; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    # the package and its lazy-export helper, which loads nothing until a name is asked for
    assert [m for m in loaded if m.startswith("mailslot")] == [
        "mailslot",
        "mailslot._lazy",
        "mailslot.defaults",
    ]
    assert all(
        m.split(".")[0] in sys.stdlib_module_names or m.startswith("mailslot") for m in loaded
    )


def test_the_search_bound_is_one_value_for_the_channel_the_cli_and_the_mcp_tool() -> None:
    assert find.LIMIT_MAX == search_tools.SEARCH_LIMIT_MAX == defaults.SEARCH_LIMIT_MAX
    assert find.LIMIT_DEFAULT == defaults.SEARCH_LIMIT_DEFAULT


def test_the_web_files_are_named_under_the_root() -> None:
    root = Path("/r")
    assert defaults.peer_inbox(root) == root / "peer" / "inbox"
    assert defaults.peer_keys(root).parent == defaults.peers_file(root).parent == root / "peer"
    assert defaults.board_db(root).name == "agora.db"
