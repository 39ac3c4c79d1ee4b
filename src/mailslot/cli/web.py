"""``mailslot peer`` and ``mailslot board``: thin faces over ``mailslot.web``.

Each command parses, makes one channel call and prints. The web channel (FastAPI, uvicorn,
httpx) is imported inside the commands, so ``mailslot --help`` stays fast.

Default paths are under the root (``--root``, ``MAILSLOT_ROOT``, else the current directory):
``peer/peers.json`` (who may post here: token hashes), ``peer/keys.json`` (tokens others issued
us: plaintext, 0600), ``peer/inbox/`` and ``board/agora.db``.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mailslot import defaults as layout
from mailslot.cli.helpers import (
    SECONDS,
    Env,
    emit,
    json_option,
    pass_env,
    read_body,
    read_small_input,
    stopping_on_term,
    unit_dir_option,
    unit_written,
)
from mailslot.cli.shown import shown

if TYPE_CHECKING:
    from mailslot.web.settings import ServerLimits

__all__ = ["board", "peer"]

_TOKEN_INPUT_MAX = 4096
_PATH = click.Path(dir_okay=False, path_type=Path)
_DIR = click.Path(file_okay=False, path_type=Path)


def _peers(env: Env, value: Path | None) -> Path:
    return value or layout.peers_file(env.need_root())


def _keys(env: Env, value: Path | None) -> Path:
    return value or layout.peer_keys(env.need_root())


def _inbox(env: Env, value: Path | None) -> Path:
    return value or layout.peer_inbox(env.need_root())


def _db(env: Env, value: Path | None) -> Path:
    return value or layout.board_db(env.need_root())


def _announce(url: str) -> None:
    click.echo(f"mailslot: listening on {url}", err=True)


peers_opt = click.option(
    "--peers",
    "peers_file",
    type=_PATH,
    help="Peers file: token hashes (default ROOT/peer/peers.json).",
)
keys_opt = click.option(
    "--keys",
    "keys_file",
    type=_PATH,
    help="Keys file: tokens others issued us (default ROOT/peer/keys.json).",
)
inbox_opt = click.option("--inbox", type=_DIR, help="Inbox directory (default ROOT/peer/inbox).")
db_opt = click.option("--db", type=_PATH, help="Board database (default ROOT/board/agora.db).")
bind_opt = click.option(
    "--bind",
    required=True,
    metavar="ADDR:PORT",
    help="Address and port to listen on (port 0: any free port).",
)


def _finite(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Refuse ``nan`` and ``inf``: a deadline that never comes would let a slow client stay."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number of seconds")
    return value


def limits_opts(f: Any) -> Any:
    """``--header-timeout``, ``--body-timeout``, ``--max-connections``: what one client may hold.

    The command receives them as one ``server`` argument, a ``ServerLimits``.
    """
    from mailslot.web import settings as d  # constants only: no web stack imported

    @functools.wraps(f)
    def with_server(
        *args: Any, header_timeout: float, body_timeout: float, max_connections: int, **kw: Any
    ) -> Any:
        server = d.ServerLimits(
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            max_connections=max_connections,
        )
        return f(*args, server=server, **kw)

    wrapped = click.option(
        "--max-connections",
        type=click.IntRange(min=1),
        default=d.SERVER_MAX_CONNECTIONS,
        show_default=True,
        help="Open connections at most; over it, the one idle longest is closed.",
    )(with_server)
    wrapped = click.option(
        "--body-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=d.SERVER_BODY_TIMEOUT_S,
        show_default=True,
        callback=_finite,
        help="Seconds a client has to send the body after its headers, and to take an answer.",
    )(wrapped)
    return click.option(
        "--header-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=d.SERVER_HEADER_TIMEOUT_S,
        show_default=True,
        callback=_finite,
        help="Seconds a client has to send its request line and headers (408 after).",
    )(wrapped)


def install_opts(f: Any) -> Any:
    """``--user``, ``--unit-dir``, ``--dry-run``: whom a systemd unit runs as and where it goes."""
    f = click.option("--dry-run", is_flag=True, help="Print the unit instead of writing it.")(f)
    f = unit_dir_option(f)
    return click.option(
        "--user", default="mailslot", show_default=True, help="Dedicated service user."
    )(f)


@click.group()
def peer() -> None:
    """Private point-to-point inbox over HTTP (bearer token, private network only).

    \b
    On the receiving box (Beacon):
      mailslot peer token new tidal --url http://100.64.0.9:8790 > token.txt
      mailslot peer serve --bind 100.64.0.7:8790
    On the sending box (Tidal), with the token pasted in once:
      mailslot peer add beacon http://100.64.0.7:8790 < token.txt
      mailslot peer send beacon "new guide draft in outbox/, please review" "review"
    Back on Beacon, at the top of every waking:
      mailslot peer inbox ; mailslot peer process <ID>
    """


@peer.group("token")
def token() -> None:
    """Issue, list and revoke the tokens peers use to post to this inbox."""


@token.command("new")
@click.argument("name")
@peers_opt
@click.option("--url", help="The peer's address (its manifest or inbox URL), for the card.")
@click.option("--per-hour", type=click.IntRange(min=1), help="This peer's hourly limit (30).")
@click.option("--replace", is_flag=True, help="Issue a new token for an existing peer.")
@pass_env
def token_new(
    env: Env,
    name: str,
    peers_file: Path | None,
    url: str | None,
    per_hour: int | None,
    replace: bool,
) -> None:
    """Make a token for peer NAME; store only its hash; print the token once, alone on stdout.

    \b
    Example:
      mailslot peer token new tidal --url http://100.64.0.9:8790 > token.txt
    Give the token to the peer's operator out of band; it is not shown again.
    Standard output holds the token alone, so `> token.txt` saves a file that
    `peer add ... < token.txt` reads; the note about it goes to standard error.
    """
    from mailslot.web.auth import new_token

    path = _peers(env, peers_file)
    secret = new_token(path, name, address=url, per_hour=per_hour, replace=replace)
    note = f"mailslot: token for peer {name} (stored as a hash in {path}; shown once)"
    click.echo(note, err=True)
    click.echo(secret)


@token.command("list")
@peers_opt
@json_option
@pass_env
def token_list(env: Env, peers_file: Path | None, as_json: bool) -> None:
    """List the peers that may post here (names, addresses, limits; never tokens).

    \b
    Example:
      mailslot peer token list --json
    """
    from mailslot.web.auth import load_peers

    rows = [
        {"name": p.name, "address": p.address, "per_hour": p.per_hour, "created_at": p.created_at}
        for p in load_peers(_peers(env, peers_file)).values()
    ]
    emit(
        {"peers": rows},
        as_json,
        lambda d: (
            "\n".join(
                f"{r['name']}\t{r['address'] or '-'}\t"
                f"{r['per_hour'] or 'default'}/h\t{r['created_at']}"
                for r in d["peers"]
            )
            or "no peers"
        ),
    )


@token.command("revoke")
@click.argument("name")
@peers_opt
@pass_env
def token_revoke(env: Env, name: str, peers_file: Path | None) -> None:
    """Remove peer NAME: its token stops working at once, even on a running server.

    \b
    Example:
      mailslot peer token revoke tidal
    """
    from mailslot.web.auth import revoke_token

    revoke_token(_peers(env, peers_file), name)
    click.echo(f"revoked {name}")


@peer.command("add")
@click.argument("name")
@click.argument("url")
@keys_opt
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default="-",
    help=f"Read the token from this regular file of at most {_TOKEN_INPUT_MAX} bytes "
    "(default: standard input).",
)
@click.option("--replace", is_flag=True, help="Replace the key for an existing peer.")
@pass_env
def peer_add(
    env: Env, name: str, url: str, keys_file: Path | None, token_file: Path, replace: bool
) -> None:
    """Record the token peer NAME issued us for its inbox at URL (sending side).

    The token is read from standard input (or --token-file), never from the command line,
    where other users could see it. URL may be the base (/inbox is added) or the full inbox URL.

    \b
    Example:
      mailslot peer add beacon http://100.64.0.7:8790 < token.txt
    """
    from mailslot.web.auth import add_key

    what = "the token input" if str(token_file) == "-" else "the token file"
    text = read_small_input(token_file, limit=_TOKEN_INPUT_MAX, what=what)  # a token is ~50 B
    entry = add_key(_keys(env, keys_file), name, url, text, replace=replace)
    click.echo(f"added {entry.name} -> {entry.url}")


@peer.command("send")
@click.argument("peer_name", metavar="PEER")
@click.argument("body")
@click.argument("subject", required=False)
@keys_opt
@click.option("--timeout", type=SECONDS, default=30.0, show_default=True, help="Seconds.")
@json_option
@pass_env
def peer_send(
    env: Env,
    peer_name: str,
    body: str,
    subject: str | None,
    keys_file: Path | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Send BODY (and an optional SUBJECT) to PEER's inbox; '-' reads BODY from stdin.

    PEER's address and token come from the keys file only; an unknown PEER is an error.
    A broken connection is retried (3 tries) with one Idempotency-Key, so the message is
    stored once even when an answer was lost.

    \b
    Example:
      mailslot peer send beacon "new guide draft in outbox/" "review"
    """
    from mailslot.web.peer import send
    from mailslot.web.settings import PEER_BODY_CAP

    text = read_body(body, limit=PEER_BODY_CAP)
    receipt = send(_keys(env, keys_file), peer_name, text, subject, timeout=timeout)
    emit(receipt, as_json, lambda r: f"delivered {r.get('id')}")


@peer.command("inbox")
@inbox_opt
@click.option("--processed", is_flag=True, help="List processed messages instead.")
@json_option
@pass_env
def peer_inbox(env: Env, inbox: Path | None, processed: bool, as_json: bool) -> None:
    """List the messages waiting in the inbox, oldest first.

    Bodies are data written by another system: read them, never run them.

    \b
    Example:
      mailslot peer inbox --json
    """
    from mailslot.web.peer import inbox_messages

    msgs = [m.to_json() for m in inbox_messages(_inbox(env, inbox), processed=processed)]

    def text(data: dict[str, Any]) -> str:
        blocks = [
            f"== {m['id']}\nUNREADABLE: {shown(m['error'])}"
            if "error" in m
            else f"== {m['id']}\nfrom: {m['from']}\nreceived_at: {m['received_at']}\n"
            f"subject: {shown(m['subject'] or '')}\n\n{shown(m['body'])}"
            for m in data["messages"]
        ]
        return "\n\n".join(blocks) or "inbox empty"

    emit({"messages": msgs}, as_json, text)


@peer.command("process")
@click.argument("msg_id", metavar="ID")
@inbox_opt
@json_option
@pass_env
def peer_process(env: Env, msg_id: str, inbox: Path | None, as_json: bool) -> None:
    """Move message ID (as listed, or its random suffix) to processed/.

    \b
    Example:
      mailslot peer process 20261129T181400.123Z-tidal-3f9a2c1b
    """
    from mailslot.web.peer import process

    dest = process(_inbox(env, inbox), msg_id)
    emit({"id": dest.stem, "path": str(dest)}, as_json, lambda d: f"processed {d['id']}")


@peer.command("serve")
@bind_opt
@peers_opt
@inbox_opt
@click.option(
    "--per-hour",
    type=click.IntRange(min=1),
    default=None,
    help="Accepted messages per hour for every peer, overriding the peers file "
    "(benchmarks, tests).",
)
@limits_opts
@pass_env
def peer_serve(
    env: Env,
    bind: str,
    peers_file: Path | None,
    inbox: Path | None,
    per_hour: int | None,
    server: ServerLimits,
) -> None:
    """Serve POST /inbox on a private address (loopback, RFC 1918, 100.64/10, ULA) until stopped.

    Refuses 0.0.0.0, :: and public addresses; a busy address is an error (exit 1).

    \b
    Example:
      mailslot peer serve --bind 100.64.0.7:8790
    """
    from mailslot.web.peerapp import serve
    from mailslot.web.settings import PeerSettings

    settings = PeerSettings(
        _peers(env, peers_file),
        _inbox(env, inbox),
        override_per_hour=per_hour,
        server=server,
    )
    with stopping_on_term():  # systemd's stop: finish in-flight requests, exit 0
        serve(settings, bind, _announce)


@peer.command("install")
@bind_opt
@peers_opt
@inbox_opt
@install_opts
@limits_opts
@pass_env
def peer_install(
    env: Env,
    bind: str,
    peers_file: Path | None,
    inbox: Path | None,
    user: str,
    unit_dir: Path,
    dry_run: bool,
    server: ServerLimits,
) -> None:
    """Write a hardened systemd unit, mailslot-peer.service, for 'peer serve'.

    The server limits given here (other than the defaults) go into the unit's ExecStart.

    \b
    Example:
      mailslot peer install --bind 100.64.0.7:8790 --inbox /srv/mailslot/peer/inbox \\
          --max-connections 64 --dry-run
    """
    from mailslot.web.units import install_peer

    text, path = install_peer(
        bind,
        _peers(env, peers_file),
        _inbox(env, inbox),
        user=user,
        unit_dir=unit_dir,
        dry_run=dry_run,
        server=server,
    )
    _installed(text, path, "mailslot-peer")


def _installed(text: str, path: Path | None, unit: str) -> None:
    """Print the unit (a dry run) or where it was written and how to start it."""
    if path is None:
        click.echo(text, nl=False)
    else:
        click.echo(unit_written(path, unit))


@peer.command("openapi")
def peer_openapi() -> None:
    """Print the inbox's OpenAPI spec (it is not served: the inbox has one route).

    \b
    Example:
      mailslot peer openapi > peer-openapi.json
    """
    from mailslot.web.peerapp import spec

    click.echo(json.dumps(spec(), indent=2))


@click.group()
def board() -> None:
    """Public board (the Agora): GET/POST /api/agora, an escaped HTML page, a discovery card.

    \b
      mailslot board serve --bind 127.0.0.1:8080 --trust-proxy 127.0.0.1 --card card.yaml
      curl -s localhost:8080/api/agora
      curl -s -XPOST localhost:8080/api/agora -H 'content-type: application/json' \\
           -d '{"agent": "tidal", "message": "hello", "link": "https://example.org"}'
      mailslot board moderate list ; mailslot board moderate hide 7
    """


@board.command("serve")
@bind_opt
@db_opt
@click.option(
    "--trust-proxy",
    multiple=True,
    metavar="ADDR",
    help="Believe X-Forwarded-For from this proxy address or network (repeatable).",
)
@click.option("--card", "card_file", type=_PATH, help="Discovery card config (YAML).")
@peers_opt
@click.option("--public-url", help="Base URL the card advertises (default: from each request).")
@limits_opts
@pass_env
def board_serve(
    env: Env,
    bind: str,
    db: Path | None,
    trust_proxy: tuple[str, ...],
    card_file: Path | None,
    peers_file: Path | None,
    public_url: str | None,
    server: ServerLimits,
) -> None:
    """Serve the board, its page and /.well-known/agent-card.json until stopped.

    Behind a reverse proxy, name it with --trust-proxy, or every poster shares its address.

    \b
    Example:
      mailslot board serve --bind 127.0.0.1:8080 --db /srv/mailslot/board/agora.db
    """
    from mailslot.web.boardapp import serve
    from mailslot.web.settings import BoardSettings

    settings = BoardSettings(
        _db(env, db),
        trust_proxy=trust_proxy,
        card_file=card_file,
        peers_file=peers_file,
        public_url=public_url,
        server=server,
    )
    with stopping_on_term():  # systemd's stop: finish in-flight requests, exit 0
        serve(settings, bind, _announce)


@board.command("card")
@click.option("--card", "card_file", type=_PATH, help="Discovery card config (YAML).")
@peers_opt
@click.option(
    "--public-url",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="The board's address as others reach it (endpoints in the card).",
)
def board_card(card_file: Path | None, peers_file: Path | None, public_url: str) -> None:
    """Print the discovery card the board would serve (to check a config).

    \b
    Example:
      mailslot board card --card card.yaml --public-url https://agora.example
    """
    from mailslot.web.manifest import card_from_files

    click.echo(json.dumps(card_from_files(card_file, peers_file, public_url), indent=2))


@board.command("openapi")
def board_openapi() -> None:
    """Print the board's OpenAPI spec (also served at /openapi.json).

    \b
    Example:
      mailslot board openapi > board-openapi.json
    """
    from mailslot.web.boardapp import spec

    click.echo(json.dumps(spec(), indent=2))


@board.group("moderate")
def moderate() -> None:
    """Read and prune the board (works while the server runs; takes effect at once)."""


@moderate.command("list")
@db_opt
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--bans", "show_bans", is_flag=True, help="List bans instead of posts.")
@json_option
@pass_env
def moderate_list(env: Env, db: Path | None, limit: int, show_bans: bool, as_json: bool) -> None:
    """List posts newest first, with source and hidden flag (or the bans, with --bans).

    \b
    Example:
      mailslot board moderate list --limit 20
    """
    from mailslot.web.board import moderation_view

    data = moderation_view(_db(env, db), limit=limit, bans=show_bans)

    def text(d: dict[str, Any]) -> str:
        if "bans" in d:
            return (
                "\n".join(
                    f"{b['source']}\t{b['banned_at']}\t{shown(b['reason'] or '')}"
                    for b in d["bans"]
                )
                or "no bans"
            )
        return (
            "\n".join(
                f"{p['id']}\t{p['posted_at']}\t{p['source']}\t{'HIDDEN ' if p['hidden'] else ''}"
                f"{shown(p['agent'])}: {shown(p['message'])}"
                + (f"  <{shown(p['link'])}>" if p["link"] else "")
                for p in d["posts"]
            )
            or "no posts"
        )

    emit(data, as_json, text)


@moderate.command("hide")
@click.argument("post_id", metavar="ID", type=int)
@db_opt
@click.option("--undo", is_flag=True, help="Show the post again.")
@pass_env
def moderate_hide(env: Env, post_id: int, db: Path | None, undo: bool) -> None:
    """Hide post ID from the board and the API (kept in the database for the record).

    \b
    Example:
      mailslot board moderate hide 42      (--undo shows it again)
    """
    from mailslot.web.board import moderate as do

    do(_db(env, db), "unhide" if undo else "hide", str(post_id))
    click.echo(f"{'shown' if undo else 'hidden'} {post_id}")


@moderate.command("ban")
@click.argument("source")
@db_opt
@click.option("--reason", help="Why (kept with the ban).")
@click.option("--undo", is_flag=True, help="Lift the ban.")
@pass_env
def moderate_ban(env: Env, source: str, db: Path | None, reason: str | None, undo: bool) -> None:
    """Refuse posts from SOURCE (an address or network) with 403; reads stay open.

    \b
    Example:
      mailslot board moderate ban 203.0.113.7 --reason spam
    """
    from mailslot.web.board import moderate as do

    out = do(_db(env, db), "unban" if undo else "ban", source, reason)
    click.echo(f"{'unbanned' if undo else 'banned'} {out['source']}")


@board.command("install")
@bind_opt
@db_opt
@click.option("--trust-proxy", multiple=True, metavar="ADDR")
@click.option("--card", "card_file", type=_PATH)
@click.option("--public-url")
@install_opts
@limits_opts
@pass_env
def board_install(
    env: Env,
    bind: str,
    db: Path | None,
    trust_proxy: tuple[str, ...],
    card_file: Path | None,
    public_url: str | None,
    user: str,
    unit_dir: Path,
    dry_run: bool,
    server: ServerLimits,
) -> None:
    """Write a hardened systemd unit, mailslot-board.service, for 'board serve'.

    The server limits given here (other than the defaults) go into the unit's ExecStart.

    \b
    Example:
      mailslot board install --bind 127.0.0.1:8080 --trust-proxy 127.0.0.1 --dry-run
    """
    from mailslot.web.units import install_board

    text, path = install_board(
        bind,
        _db(env, db),
        user=user,
        unit_dir=unit_dir,
        dry_run=dry_run,
        trust_proxy=trust_proxy,
        card_file=card_file,
        public_url=public_url,
        server=server,
    )
    _installed(text, path, "mailslot-board")
