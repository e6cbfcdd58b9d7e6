"""A consumer group member that leaves with an acceptance its router never settled, on real
routers (``docs/protocol.md`` section 8, "Why this is enough").

Its connection to its router goes silent (a proxy holds every byte) after the member took the
message: the acceptance queues on it, and is lost with it when the connection is cut. The
client's ``close(unsubscribe=True)`` waits for the settlement, and when it does not come
attaches again, on a new connection (to the next router), its unsettled map naming the
message, before it closes: that router tells every router what the member had, and the
message never goes to another member. (Closing on the silent connection instead, the router
that lost it suspended the member, gave it up after its grace, and passed the message to the
second member, which processed it too.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from once.client import Publisher, Subscriber
from once.router.amqp.performatives import Accepted
from once.tools.harness.proxy import Proxy
from support.routers import Network


async def _until(condition, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_a_member_leaving_on_a_silent_connection_still_says_what_it_accepted(tmp_path: Path):
    net = Network("line3.yaml", tmp_path, settings={"subscriber_grace": "2s"})
    proxy = Proxy(int(net["A"].url.rsplit(":", 1)[1]))
    try:
        first = Subscriber([f"amqp://127.0.0.1:{proxy.port}", net["B"].url], "jobs", tmp_path / "first.db",
                           group="workers", grace=2)
        await first.start()
        await asyncio.wait_for(first.attached.wait(), 20)
        async with Publisher([net["C"].url], "jobs", tmp_path / "pub.db") as pub:
            sent = pub.send_nowait(b"job", "j0")
            msg = await first.receive(20)  # (the group's only member: it is chosen)
            second = Subscriber([net["C"].url], "jobs", tmp_path / "second.db", group="workers", grace=2)
            await second.start()
            await asyncio.wait_for(second.attached.wait(), 20)

            proxy.freeze()
            await msg.accept()  # (recorded in its store; the disposition is held in the proxy)
            await first.close(unsubscribe=True, timeout=1.0)
            proxy.cut()  # (what it held goes with the connection)
            proxy.heal()

            # the publisher hears `accepted` without the second member ever having it
            await _until(lambda: sent.done() or second.queued > 0, 60, "an outcome or a second delivery")
            assert second.queued == 0, "the message went to a second member"
            assert isinstance(sent.result(), Accepted)
            later = pub.send_nowait(b"next", "j1")  # (the group goes on: the second member has it)
            got = await second.receive(20)
            assert got.message_id == "j1"
            await got.accept()
            assert isinstance(await asyncio.wait_for(later, 20), Accepted)
            assert second.duplicates == 0 and second.queued == 0
        await second.close(unsubscribe=True)
    finally:
        proxy.close()
        net.stop()
