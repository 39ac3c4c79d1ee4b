"""mailslot.core: the one place that touches the disk for every channel.

It imports nothing from the rest of mailslot. Channels build on these pieces:
names (what may become a path), clock (the one ``now()``), formats (frontmatter, YAML, JSON),
fsio (atomic and numbered create, locked append), move (a move that never overwrites and never
follows a symlink), lockwait (the one bounded wait for a lock, the ``mkdir`` lock), cursor (reader
positions in the reader's own state dir), wait (kernel file events, armed before the check),
command and git (external programs and git: bounded, never left behind), units (systemd units,
one hardening set), limits, errors.
"""
