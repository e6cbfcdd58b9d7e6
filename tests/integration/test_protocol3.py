"""The acceptance protocol (``docs/protocol.md``) on real routers: OS processes, the AMQP
inter-router encoding (``router/adaptors/amqp/copies_wire.py``), standard Proton clients,
with more messages in flight than the window of one batch."""

from __future__ import annotations

import queue

import pytest
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import Network

ACCEPTED = 36


@pytest.mark.parametrize("topology", ["line3.yaml", "mesh3.yaml"])
def test_every_subscriber_once_in_order(tmp_path, topology):
    net = Network(topology, tmp_path)
    try:
        subs = {r: ProtonSubscriber(net[r].url, "news", name=f"sub-{r}") for r in "ABC"}
        pub = ProtonPublisher(net["A"].url, "news")
        outcomes = [pub.send(f"m{i}") for i in range(200)]
        assert [o.get(timeout=30) for o in outcomes] == [ACCEPTED] * 200
        for r, s in subs.items():
            assert [m.body for m in s.take(200)] == [f"m{i}" for i in range(200)], r
            with pytest.raises(queue.Empty):
                s.messages.get(timeout=0.2)
        for c in (*subs.values(), pub):
            c.close()
    finally:
        net.stop()
