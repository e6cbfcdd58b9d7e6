"""The AMQP adaptors: client connections (``edge``), inter-router links (``interrouter``)
and their helpers (the routing header, delivery states, what the router reads in a
message, shared subscriptions). Empty on purpose: the client library imports the
shared-subscription vocabulary from here without pulling the router in."""
