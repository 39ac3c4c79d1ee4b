"""What the web channel's tests share: the CLI in-process, the JSON error shape of an answer."""

from __future__ import annotations

import httpx
from click.testing import CliRunner, Result

from mailslot.cli import cli


def invoke(*args: str, input: str | None = None) -> Result:
    """Run ``mailslot ARGS`` in-process through CliRunner."""
    return CliRunner().invoke(cli, list(args), input=input)


def is_json_error(r: httpx.Response) -> bool:
    """Whether the answer is the apps' error shape: a JSON object with a text ``error``."""
    return isinstance(r.json(), dict) and isinstance(r.json().get("error"), str)
