"""mailslot.bridge: exchanges and chats across hosts, over NATS JetStream.

Each host keeps its own copy of a bridged directory and its agents use it as on one host. One
``nats-server`` per host (its own JetStream domain, hosts joined by leafnodes) and one bridge:
the bridge publishes what local sides wrote and materialises what remote sides wrote, store and
forward like Maildir plus SMTP, so a host that is cut off keeps working and catches up later.

The bridge sits above the channels it carries (it reads an exchange's layout, as a face does);
the channels know nothing of it. Modules:

* ``config``      -- ``bridge.yaml``: this host, its server, peers, who hosts which side.
* ``server``      -- ``nats.conf`` and the supervised ``nats-server`` child.
* ``wire``        -- subjects, headers, and ``check_incoming`` (identity from the transport).
* ``outbox``      -- which local files are this host's to publish, read whole and bounded.
* ``materialise`` -- writing a peer's file durably before the acknowledgement.
* ``ledger``      -- revisions and alerts kept between runs.
* ``streams``     -- this host's streams and consumers, and the connection to them.
* ``publisher``   -- what this host's sides wrote, into its out stream once.
* ``receiver``    -- what peers sent, checked and written before it is acknowledged.
* ``run``         -- the running bridge (publisher, receivers, status.json); ``serve`` --
  server plus bridge.
* ``status``      -- what ``bridge status`` and ``doctor`` read.
"""

from __future__ import annotations
