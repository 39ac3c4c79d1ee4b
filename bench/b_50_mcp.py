"""MCP server: what an agent pays per turn and per check, and how fast it starts.

* tool list: the JSON of every listed tool (name, description, input schema, annotations) with
  every channel configured -- every agent carries it in context on every turn (target <= 8,000
  characters; a peer ships ~46,000).
* idle check: the whole ``tools/call`` result of ``exchange_watch`` / ``chat_wait`` when nothing
  is new, as JSON bytes (target <= 200).
* start-up: from spawning ``python -m mailslot mcp`` to a listed tool set, through the SDK's own
  stdio client, against a bare ``python -c "import mcp.server.stdio"`` (spawn to import done)
  measured in the same run, interleaved (target: at most 0.5 s over the bare import; a peer
  needs 7.9 s).
* one tool call: ``exchange_send`` round trip through the server (for reference).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import anyio
from common import Result, dist
from mcp import ClientSession, StdioServerParameters, stdio_client

from mailslot.bus import layout
from mailslot.exchange.create import create_exchange
from mailslot.web.auth import add_key

STARTS = 9
CALLS = 100
TOOLS_MAX_CHARS = 8000
IDLE_MAX_BYTES = 200
START_OVER_MAX_S = 0.5


def _setup(tmp: Path) -> list[str]:
    root = tmp / "x"
    create_exchange(root, ["claude", "olu"], git=False)
    (tmp / "chats").mkdir()
    layout.init(tmp / "shared", consumer="beacon")
    add_key(tmp / "keys.json", "beacon", "http://127.0.0.1:9/", "mst_bench")
    chats, bus, keys = str(tmp / "chats"), str(tmp / "shared"), str(tmp / "keys.json")
    return ["--root", str(root), "--as", "olu", "--chat-dir", chats, "--bus", bus, "--keys", keys]


def _params(args: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "mailslot", "mcp", *args])


async def _start_to_tools(args: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    async with stdio_client(_params(args)) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        tools = await s.list_tools()
        took = time.perf_counter() - t0
        listed = json.dumps(
            [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools.tools]
        )
    return took, listed


def _bare_import() -> float:
    """Spawn to the end of ``import mcp.server.stdio`` (the clock stops when the process says
    the import is done, not at its exit, so interpreter teardown does not pad the floor)."""
    t0 = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, "-c", "import mcp.server.stdio; print('ok', flush=True)"],
        stdout=subprocess.PIPE,
        text=True,
    ) as p:
        assert p.stdout is not None and p.stdout.readline() == "ok\n"
        took = time.perf_counter() - t0
    return took


async def _calls(args: list[str]) -> tuple[int, int, list[float]]:
    async with stdio_client(_params(args)) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        idle = await s.call_tool("exchange_watch", {"timeout": 0})
        assert not idle.is_error, idle
        idle_bytes = len(idle.model_dump_json(by_alias=True, exclude_none=True).encode())
        made = await s.call_tool("chat_new", {"topic": "bench"})
        chat = made.content[0].text.split()[1]  # type: ignore[union-attr]
        cidle = await s.call_tool("chat_wait", {"chat": chat, "timeout": 0})
        chat_bytes = len(cidle.model_dump_json(by_alias=True, exclude_none=True).encode())
        samples = []
        for i in range(CALLS):
            t0 = time.perf_counter()
            res = await s.call_tool(
                "exchange_send", {"topic": f"t{i % 10}", "action": "fyi", "body": "bench"}
            )
            samples.append((time.perf_counter() - t0) * 1000)
            assert not res.is_error, res
    return idle_bytes, chat_bytes, samples


def run(tmp: Path) -> list[Result]:
    args = _setup(tmp)
    anyio.run(_start_to_tools, args)  # warm the page cache for both sides alike
    _bare_import()
    starts, bares = [], []
    listed = ""
    for _ in range(STARTS):
        bares.append(_bare_import())
        took, listed = anyio.run(_start_to_tools, args)
        starts.append(took)
    over = median(starts) - median(bares)
    size = len(listed)
    idle_bytes, chat_bytes, samples = anyio.run(_calls, args)
    n_tools = len(json.loads(listed))
    return [
        Result(
            "mcp tool list (all channels)",
            "chars",
            value=size,
            n=n_tools,
            target=f"<= {TOOLS_MAX_CHARS}",
            ok=size <= TOOLS_MAX_CHARS,
            note=f"{n_tools} tools; a peer ships ~46,000",
        ),
        Result(
            "mcp idle exchange_watch result",
            "bytes",
            value=idle_bytes,
            target=f"<= {IDLE_MAX_BYTES}",
            ok=idle_bytes <= IDLE_MAX_BYTES,
        ),
        Result(
            "mcp idle chat_wait result",
            "bytes",
            value=chat_bytes,
            target=f"<= {IDLE_MAX_BYTES}",
            ok=chat_bytes <= IDLE_MAX_BYTES,
        ),
        dist("bare import mcp.server.stdio", bares, "s", note="the floor, same run"),
        dist("mcp start to listed tools", starts, "s", note="spawn, initialize, tools/list"),
        Result(
            "mcp start over the bare import",
            "s",
            value=over,
            n=STARTS,
            target=f"<= {START_OVER_MAX_S}",
            ok=over <= START_OVER_MAX_S,
            note="median minus median; a peer needs 7.9 s in all",
        ),
        dist("mcp exchange_send call", samples, "ms", note="round trip through the server"),
    ]
