"""MQTT 3.1.1 and 5.0, sans-IO like the AMQP engine: bytes in, packets out.

``codes.py`` the numbers (packet types, reason codes, properties); ``packets.py`` the
packets as frozen dataclasses; ``codec.py`` packets to and from bytes; ``framing.py`` the
stream cut into packets; ``topics.py`` topic names, filters, shared subscriptions and
matching; ``connection.py`` the server side of one connection (``events.py``: what it
reports). The adaptor that puts MQTT clients on the network goes beside the AMQP one
(``router/adaptors/``) and calls the same link lifecycle.
"""
