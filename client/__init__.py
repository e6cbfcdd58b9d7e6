"""The ``once`` client library: exactly-once publish and subscribe over a router network.

``Publisher`` and ``Subscriber`` keep their link state in a local SQLite file and resume
their links (with AMQP unsettled maps) on whichever router of their list is alive.
"""

from .connection import RouterRefused
from .publisher import Publisher
from .subscriber import Message, Subscriber

__all__ = ["Message", "Publisher", "RouterRefused", "Subscriber"]
