"""A peer's token: issued once and stored only as its hash, saved and added back as it was shown.

``peer token new`` prints the token alone on stdout (the notice goes to stderr), so a token saved
with ``>`` is added back with ``<`` or ``--token-file``. A token file that is empty, holds more
than the token, or is no small regular file (a FIFO, a device, a huge file) is refused with a
clear error that never echoes the secret, and never waited on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from web_helpers import invoke

from mailslot.web.auth import hash_token, load_peers


def test_token_new_prints_token_last_and_stores_only_its_hash(tmp_path: Path) -> None:
    peers = tmp_path / "peers.json"
    r = invoke(
        "peer", "token", "new", "tidal", "--peers", str(peers), "--url", "http://100.64.0.9:8790"
    )
    assert r.exit_code == 0, r.output
    token = r.stdout.splitlines()[-1]
    assert token.startswith("mst_") and len(token) > 40
    text = peers.read_text()
    assert token not in text
    assert hash_token(token) in text
    assert oct(peers.stat().st_mode & 0o777) == "0o600"
    entry = load_peers(peers)["tidal"]
    assert entry.address == "http://100.64.0.9:8790"
    assert entry.per_hour == 30  # the limit is written out with the hash
    again = invoke("peer", "token", "new", "tidal", "--peers", str(peers))
    assert again.exit_code == 1 and "--replace" in again.stderr
    bad = invoke("peer", "token", "new", "../evil", "--peers", str(peers))
    assert bad.exit_code == 1 and "invalid peer name" in bad.stderr
    listed = invoke("peer", "token", "list", "--peers", str(peers), "--json")
    assert json.loads(listed.stdout)["peers"][0]["name"] == "tidal"
    assert token not in listed.stdout and hash_token(token) not in listed.stdout


def test_token_new_through_the_console_command(tmp_path: Path, run_cli) -> None:
    peers = tmp_path / "p.json"
    r = run_cli("peer", "token", "new", "tidal", "--peers", str(peers))
    assert r.returncode == 0, r.stderr
    token = r.stdout.rstrip("\n").splitlines()[-1]
    assert token.startswith("mst_") and " " not in token
    assert load_peers(peers)["tidal"].token_sha256 == hash_token(token)


def test_a_token_saved_with_redirection_is_added_as_saved(tmp_path: Path, run_cli) -> None:
    """The README's steps: `peer token new tidal > token.txt`, then `peer add ... < token.txt`."""
    peers, keys, saved = tmp_path / "p.json", tmp_path / "k.json", tmp_path / "token.txt"
    r = run_cli("peer", "token", "new", "tidal", "--peers", str(peers))
    assert r.returncode == 0, r.stderr
    saved.write_text(r.stdout)
    token = r.stdout.strip()
    assert r.stdout == token + "\n" and token.startswith("mst_")  # the token alone on stdout
    assert "shown once" in r.stderr
    r = run_cli("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys),
                input=saved.read_text())  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(keys.read_text())["peers"]["beacon"]["token"] == token


@pytest.mark.parametrize(
    ("saved", "says"),
    [
        ("", "the input was empty"),
        (
            "# token for peer tidal (shown once):\nmst_abcdef\n",
            "got 2 lines; a line starting with '#'",
        ),
        ("mst_abc def\n", "contains spaces"),
    ],
)
def test_a_bad_token_file_says_what_is_wrong_with_it(tmp_path: Path, saved: str, says: str) -> None:
    r = invoke("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(tmp_path / "k.json"),
             input=saved)  # fmt: skip
    assert r.exit_code == 1 and says in r.stderr, r.stderr
    assert "mst_abc" not in r.stderr  # the secret is never echoed
    assert not (tmp_path / "k.json").exists()


@pytest.mark.parametrize("kind", ["fifo", "device", "oversized"])
def test_a_token_file_that_is_no_small_regular_file_is_refused_at_once(
    tmp_path: Path, run_cli, kind: str
) -> None:
    """A FIFO nobody writes would block the reader, a device feeds it without end, a huge file
    is not a token: each is refused with a clear error, read at most 4 KB + 1, never waited on."""
    source = tmp_path / "token.txt"
    if kind == "fifo":
        os.mkfifo(source)
    elif kind == "device":
        source.symlink_to("/dev/zero")  # the path the operator named may be a symlink
    else:
        source.write_text("mst_" + "a" * 10_000 + "\n")
    keys = tmp_path / "k.json"
    r = run_cli("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys),
                "--token-file", str(source), timeout=30)  # fmt: skip
    assert r.returncode == 1, r.stderr
    says = "more than 4096 bytes" if kind == "oversized" else "not a regular file"
    assert says in r.stderr and "the token file" in r.stderr, r.stderr
    assert "aaaa" not in r.stderr  # the input is never echoed
    assert not keys.exists()


def test_a_token_file_is_read_through_a_symlink_the_operator_named(tmp_path: Path) -> None:
    (tmp_path / "token.txt").write_text("mst_abcdefghijklmnop\n")
    (tmp_path / "link").symlink_to(tmp_path / "token.txt")
    keys = tmp_path / "k.json"
    r = invoke("peer", "add", "beacon", "http://127.0.0.1:9", "--keys", str(keys),
             "--token-file", str(tmp_path / "link"))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert json.loads(keys.read_text())["peers"]["beacon"]["token"] == "mst_abcdefghijklmnop"
