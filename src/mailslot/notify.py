"""One batched notification per tick, through Apprise URLs.

A notification is a courtesy, never a gate: ``send`` does not raise. It returns ``None`` on
success or a short reason on failure, so the caller can report it and retry on its next run while
archive and commit go ahead. Apprise is imported only when something is sent, so commands that
never notify never pay for it. Error reasons never echo the URLs, which often carry secrets.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

__all__ = ["AppriseNotifier", "Notifier", "invalid_urls"]

log = logging.getLogger(__name__)


class Notifier(Protocol):
    """Anything that can deliver one message; returns ``None`` or why it failed."""

    def send(self, title: str, body: str) -> str | None:
        """Deliver ``title``/``body`` once; never raises."""
        ...


class AppriseNotifier:
    """Deliver to every Apprise URL given (``json://``, ``tgram://``, ``mailto://`` ...)."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)

    def send(self, title: str, body: str) -> str | None:
        """Notify every URL; ``None`` when all succeeded, else the reason (never raises)."""
        if not self.urls:
            return "no notification target configured"
        try:
            import apprise
        except ImportError:
            return "apprise is not installed (pip install 'mailslot[notify]')"
        try:
            ap = apprise.Apprise()
            for i, url in enumerate(self.urls, 1):
                if not ap.add(url):
                    return f"notification URL #{i} is not a valid Apprise URL"
            with apprise.LogCapture(level=logging.WARNING) as captured:  # type: ignore[no-untyped-call]
                ok = ap.notify(title=title, body=body)
                detail = [
                    line.rsplit(" - ", 1)[-1] for line in captured.getvalue().strip().splitlines()
                ]
        except Exception as e:  # a notifier must never break the tick
            log.warning("notification failed: %s", e)
            return f"notification failed: {type(e).__name__}"
        if not ok:
            reason = detail[-1] if detail else "a target refused or could not be reached"
            return f"notification failed: {reason}"
        return None


def invalid_urls(urls: Sequence[str]) -> list[str]:
    """Why each URL Apprise cannot parse is refused (``#N is not a valid Apprise URL``); empty
    when all parse. Configuration time is the moment to say so, not every tick afterwards."""
    if not urls:
        return []
    try:
        import apprise
    except ImportError:
        return ["apprise is not installed (pip install 'mailslot[notify]')"]
    ap = apprise.Apprise()
    return [f"#{i} is not a valid Apprise URL" for i, url in enumerate(urls, 1) if not ap.add(url)]
