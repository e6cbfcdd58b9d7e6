"""The transactional outbox's relay (``docs/outbox.md``; seed 001).

An application inserts its message into an outbox table in its own database transaction
(``once.client.outbox``: the tables, ``send``); the relay (``relay.py``) reads the tables
and publishes each row through the exactly-once publisher (``once.client``), deleting it
once every subscriber accepted. One relay per table at a time (``claims.py``), woken by
NOTIFY (``wakeup.py``), stranded rows counted (``watch.py``), its ``/metrics``
(``metrics.py``). The database is SQLite (the embedded default) or PostgreSQL.
"""
