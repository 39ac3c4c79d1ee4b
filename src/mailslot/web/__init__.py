"""The web channel: a private peer inbox, a public board (Agora), a discovery card.

Layout, so the command line stays fast: the channel modules (``auth``, ``peer``, ``board``,
``manifest``, ``bind``, ``units``, ``settings``) use only the standard library at import time;
FastAPI, uvicorn and httpx are imported by the app factories (``peerapp``, ``boardapp``,
``http``, ``ratelimit``) and inside the functions that send. Importing ``mailslot.web`` imports
nothing heavy.

Invariants every part keeps: identity comes from the token that matched (never from a body);
every bound is checked before anything is stored and refused whole with a 4xx JSON error
``{"error": "..."}``; nothing a message says reaches a shell, an eval or unescaped HTML.
"""

from __future__ import annotations

__all__: list[str] = []
