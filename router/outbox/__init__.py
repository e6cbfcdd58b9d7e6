"""The transactional outbox (issue 27; docs/outbox.md).

An application inserts its message into an outbox table in its own database transaction
(``send.py``); a relay reads the tables and publishes each row through the exactly-once
publisher, deleting it once every subscriber accepted. The database is SQLite (the
embedded default) or PostgreSQL (``dialect.py``); the tables are the seed's (``schema.py``:
shards of partitions, one table each, a primary key and nothing else).
"""
