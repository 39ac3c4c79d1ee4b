"""The page for the people who run the agents (``mailslot web``): every root given, live.

Modules: ``sources`` (what each root holds), ``views`` and ``readers`` (what each page shows,
read through the channels' own functions), ``markdown`` (entry bodies, raw HTML off),
``timepic`` (the time picture, SVG drawn here), ``guard`` (Host, login, CSRF, CSP), ``humans``
(per-person credentials), ``app`` and ``routes`` (the Starlette app), ``serve``.

Importing this package imports nothing heavy: Starlette, Jinja2 and markdown-it load with the
app (``app.create_app``).
"""

from __future__ import annotations

__all__: list[str] = []
