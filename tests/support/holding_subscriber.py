"""A Proton subscriber as its own OS process, so a test can SIGKILL it.

It prints one JSON line per message (body, delivery-count, first-acquirer) and never
accepts anything. Usage: python holding_subscriber.py URL TOPIC CONTAINER LINK [shared|exclusive|durable]
("shared": the link joins a consumer group, source capabilities shared and global;
"exclusive": an exclusive one; "durable": a shared one with a durable source).
"""

import json
import sys

from proton import Timeout
from proton.utils import BlockingConnection

url, topic, container, link = sys.argv[1:5]
options = None
if sys.argv[5:6] in (["shared"], ["exclusive"], ["durable"]):
    from proton.reactor import DurableSubscription
    from proton_options import SharedSubscription
    options = [SharedSubscription(exclusive=sys.argv[5] == "exclusive")]
    if sys.argv[5] == "durable":
        options.append(DurableSubscription())
conn = BlockingConnection(url, container_id=container)
rcv = conn.create_receiver(topic, name=link, credit=100, options=options)
print(json.dumps({"attached": True}), flush=True)
while True:
    try:
        m = rcv.receive(timeout=60)
    except Timeout:
        continue
    except Exception:  # noqa: BLE001 - the router went away: so do we
        sys.exit(1)
    print(json.dumps({"body": m.body, "delivery_count": m.delivery_count, "first_acquirer": m.first_acquirer}), flush=True)
