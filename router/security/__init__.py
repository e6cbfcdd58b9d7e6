"""Security: who a peer is and what it may do. TLS contexts and their accept loop
(``tls.py``, ``tls_accept.py``), authentication (``authn.py``: SASL mechanisms; ``users.py``:
the users file, salted hashes, SCRAM), authorization (``policy.py``: who may publish and
subscribe where), and the bounds on what one peer may hold (``quotas.py``: per user and per
host; ``limits.py``: connection limits and rate-limited logging)."""
