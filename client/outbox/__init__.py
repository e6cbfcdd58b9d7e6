"""The transactional outbox's application side (``docs/outbox.md``): the tables and their
NOTIFY trigger (``schema.py``), an application's send in its own transaction (``send.py``),
SQLite and PostgreSQL (``dialect.py``), and a row's identity in the network
(``identity.py``: the gid its relay publishes it under), and which relay serves which table
(``claims.py``: the claim tables ``init`` makes, and how a relay claims and renews). The
relay is ``once.outbox``."""
