"""Will messages (MQTT 3.1.1 3.1.2.5, 5.0 3.1.3.2): published when a client's connection
ends without a normal DISCONNECT (it went silent, broke the protocol, was taken over, or
asked for its will with DISCONNECT 0x04), after its will delay (5.0; at most its session
expiry), unless its client connected again meanwhile, at this router or another.

The will goes into the network like any message, from a publisher of its own (link name
``mqtt-will:TOPIC``) that ends as soon as it has published: the message lives on in the
network until every subscriber has it, as a suspended publisher's do. Its QoS is the
will's; the network keeps no retained messages, so a will with retain is refused at the
CONNECT in 5.0 (0x9A) and the flag ignored in 3.1.1, as for a PUBLISH.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from typing import TYPE_CHECKING, Any

from ...core import Outcome
from ...logs import fields
from ...mqtt.codes import Prop
from ...mqtt.packets import Will, prop
from .message import to_amqp

if TYPE_CHECKING:
    from ...context import RouterContext

log = logging.getLogger("once.mqtt")
_ids = itertools.count(1)
_NONCE = secrets.token_bytes(8)  # (tags unique to this router's life)


class _WillPort:
    """Nobody answers for a will: its outcome is dropped."""

    def grant(self, credit: int) -> None:
        pass

    def outcome(self, handle: Any, outcome: Outcome, settle: bool) -> None:
        pass


def will_delay(will: Will) -> int:
    delay = prop(will.props, Prop.WILL_DELAY_INTERVAL)
    return delay if isinstance(delay, int) else 0


def will_size(will: Will) -> int:
    """The bytes a will holds until it is published (its payload, topic and properties)."""
    return len(will.payload) + len(will.topic) + sum(len(v) if isinstance(v, (str, bytes)) else
                                                     sum(map(len, v)) if isinstance(v, tuple) else 4
                                                     for _, v in will.props)


def publish_will(router: RouterContext, client_id: str, will: Will, user: str) -> None:
    """Publish ``will`` into the network now, as its client's ``user`` (its router checked
    the policy at the CONNECT; the user travels with the copies, so every router where a
    subscriber is checks it by its own policy, as for any message)."""
    lifecycle = router.lifecycle
    pub, _ = lifecycle.attach_publisher(_WillPort(), will.topic, client_id, f"mqtt-will:{will.topic}", False, None,
                                        None, credited=False)
    pub.user = user or "anonymous"
    lifecycle.publisher_answered(pub)
    props = tuple((k, v) for k, v in will.props if k is not Prop.WILL_DELAY_INTERVAL)
    tag = _NONCE + next(_ids).to_bytes(8, "big")
    router.core.publish(pub, tag, to_amqp(will.topic, will.payload, props, will.qos), will.qos == 0, None)
    lifecycle.publisher_gone(pub, False)  # (its message lives on until every subscriber has it)
    router.flush()
    log.info("router %s: published the will of MQTT client %s to %r", router.id, client_id, will.topic,
             extra=fields("mqtt.will", container=client_id, topic=will.topic))
