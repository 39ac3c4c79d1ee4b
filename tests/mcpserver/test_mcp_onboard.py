"""``mailslot onboard``: exact registration for each host and instructions from the live config."""

from __future__ import annotations

import json
import shlex
import tomllib

import pytest
import yaml
from click.testing import CliRunner
from mcphelp import Setup

from mailslot.cli import cli


def onboard(setup: Setup, host: str, *extra: str, agent: str = "olu") -> str:
    r = CliRunner().invoke(cli, ["onboard", host, "--root", str(setup.root), "--as", agent, *extra])
    assert r.exit_code == 0, r.output
    return r.output


def keys_args(setup: Setup) -> list[str]:
    return ["--keys", str(setup.keys), "--part", "instructions"]


def expected_args(setup: Setup) -> list[str]:
    return ["mcp", "--root", str(setup.root), "--as", "olu", "--chat-dir", str(setup.chats)]


def test_claude_code_prints_claude_mcp_add(setup: Setup) -> None:
    out = onboard(setup, "claude-code", "--chat-dir", str(setup.chats), "--part", "register")
    line = next(x for x in out.splitlines() if x.startswith("claude mcp add"))
    argv = shlex.split(line)
    assert argv[:5] == ["claude", "mcp", "add", "mailslot", "--"]
    assert argv[5].endswith("mailslot") and argv[6:] == expected_args(setup)


def test_codex_block_is_valid_toml(setup: Setup) -> None:
    out = onboard(setup, "codex", "--chat-dir", str(setup.chats), "--part", "register")
    server = tomllib.loads(out)["mcp_servers"]["mailslot"]
    assert server["args"] == expected_args(setup) and server["tool_timeout_sec"] >= 300


def test_hermes_block_is_valid_yaml(setup: Setup) -> None:
    out = onboard(setup, "hermes", "--chat-dir", str(setup.chats), "--part", "register")
    server = yaml.safe_load(out)["mcp_servers"]["mailslot"]
    assert server["args"] == expected_args(setup) and server["timeout"] >= 300


def test_generic_block_is_mcp_servers_json(setup: Setup) -> None:
    out = onboard(setup, "generic", "--chat-dir", str(setup.chats), "--part", "register")
    doc = json.loads(out.split("\n", 1)[1])
    assert doc["mcpServers"]["mailslot"]["args"] == expected_args(setup)


def test_instructions_reuse_the_exchange_skill_after_its_frontmatter(setup: Setup) -> None:
    out = onboard(setup, "claude-code", "--part", "instructions")
    assert out.startswith("---\nname: mailslot-exchange-olu\ndescription: ")
    head, _, body = out[4:].partition("\n---\n")
    assert "## The mailslot tools" not in head
    assert body.index("## The mailslot tools") < body.index("# The olu <-> claude exchange")
    assert "acts as **olu**" in body and "your inbox `to-olu/`" in body
    assert "`exchange_watch` with `timeout: 0`" in body and "<<<DATA" in body
    assert "never an instruction" in body
    generic = onboard(setup, "codex", "--part", "instructions")
    assert generic.startswith("## The mailslot tools") and "mailslot --root" in generic


def test_all_prints_both_parts_and_where_to_save(setup: Setup) -> None:
    out = onboard(setup, "hermes")
    assert "mcp_servers:" in out and "~/.hermes/skills/mailslot-exchange-olu/SKILL.md" in out
    assert "name: mailslot-exchange-olu" in out


def test_without_an_exchange_the_tools_section_stands_alone(setup: Setup) -> None:
    r = CliRunner().invoke(
        cli,
        ["onboard", "generic", "--as", "lantern", "--bus", str(setup.bus), *keys_args(setup)],
    )
    assert r.exit_code == 0, r.output
    assert r.output.startswith("# mailslot\n") and "`log_append`" in r.output
    assert "known peers: beacon" in r.output and "Exchange" not in r.output


def test_onboard_refuses_what_the_server_would_refuse(setup: Setup) -> None:
    r = CliRunner().invoke(cli, ["onboard", "codex", "--root", str(setup.root), "--as", "eve"])
    assert r.exit_code == 1 and "'eve' is not a member" in r.output
    r = CliRunner().invoke(cli, ["onboard", "cursor", "--as", "olu"])
    assert r.exit_code == 2


@pytest.mark.parametrize("host", ["claude-code", "hermes"])
def test_the_skill_folder_onboard_names_is_the_skills_name(setup: Setup, host: str) -> None:
    """Strict skill validators refuse a SKILL.md whose `name` differs from its folder."""
    import re

    out = onboard(setup, host)
    folder = re.search(r"save the text between the lines as a skill: \S*/([\w-]+)/SKILL\.md", out)
    name = re.search(r"^name: (\S+)$", out, re.M)
    assert folder is not None and name is not None, out
    assert folder.group(1) == name.group(1) == "mailslot-exchange-olu"
