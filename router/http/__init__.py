"""The router's HTTP endpoint (``routers.X.http`` in the topology, or ``once router --http``):
``/metrics``, ``/healthz``, ``/readyz``, the read-only management API under ``/api/`` and
the console at ``/``. ``endpoint.py`` binds the routes to a router; ``server.py`` serves them."""
