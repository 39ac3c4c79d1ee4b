"""Starting the page: where it may listen, then the app on an already-bound socket."""

from __future__ import annotations

from collections.abc import Callable

from mailslot.web.bind import bind_socket, check_private, parse_bind, run_server
from mailslot.web.page.settings import PageSettings

__all__ = ["STOP_GRACE_S", "serve"]

# Open live-chat streams never finish by themselves: a stop gives requests this long, then
# closes what is left (a browser reconnects to the next server on its own).
STOP_GRACE_S = 2


def serve(settings: PageSettings, bind: str, announce: Callable[[str], None] | None = None) -> None:
    """Run the page on ``bind`` until stopped.

    A public or wildcard address is refused as the peer inbox refuses it (``check_private``);
    off loopback, reading needs a login too. Raises ``MailslotError`` for a malformed, public,
    busy or foreign address or a root with nothing to show, before anything listens.
    """
    import dataclasses

    from mailslot.web.page.app import create_app

    where = check_private(parse_bind(bind))
    sock = bind_socket(where)
    try:
        port = sock.getsockname()[1]
        settings = dataclasses.replace(settings, bind_host=where.host, port=port)
        app = create_app(settings)
    except BaseException:
        sock.close()
        raise
    if announce is not None:
        announce(where.url(port) + "/")
    try:
        run_server(app, sock, settings.server, graceful_s=STOP_GRACE_S)
    finally:
        app.close()
