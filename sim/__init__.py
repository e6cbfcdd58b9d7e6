"""A deterministic in-process network for the data plane: real cores and control planes,
in-memory links, virtual time, a seeded scheduler and a fault schedule (see ``net.py``)."""
