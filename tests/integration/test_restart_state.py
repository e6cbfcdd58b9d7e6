"""A router's subscriptions survive its restart (``once router --state DIR``): a router
SIGKILLed with a subscriber attached comes back with that subscriber suspended, so a
message published before it resumes waits for it instead of being accepted for nobody."""

from __future__ import annotations

import signal
from pathlib import Path

from proton import Delivery
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import RouterProcess, write_topology


def _restart_with_a_subscriber_kept(tmp_path: Path, state: tuple[str, ...]) -> tuple[RouterProcess, ProtonPublisher]:
    topo = write_topology(tmp_path)
    first = RouterProcess(topo, args=state)
    sub = ProtonSubscriber(first.url, "kept", name="s", container_id="kept-sub")
    first.proc.send_signal(signal.SIGKILL)  # the subscriber was attached: nothing closed it
    first.stop()  # (it is dead already: this collects its pipes)
    sub.close()
    again = RouterProcess(topo, args=state)
    pub = ProtonPublisher(again.url, "kept")
    return again, pub


def test_a_subscriber_attached_when_its_router_was_killed_is_waited_for_after_the_restart(tmp_path: Path):
    again, pub = _restart_with_a_subscriber_kept(tmp_path, ("--state", str(tmp_path / "state")))
    try:
        outcome = pub.send("while you were away")  # not accepted: the subscriber is suspended
        back = ProtonSubscriber(again.url, "kept", name="s", container_id="kept-sub")  # it resumes
        assert back.get(20).body == "while you were away"
        assert outcome.get(timeout=20) == Delivery.ACCEPTED
        back.close()
    finally:
        pub.close()
        again.stop()


def test_without_a_state_directory_the_restarted_router_forgot_it(tmp_path: Path):
    """The same with memory only: the message is accepted for nobody (what the journal is for)."""
    again, pub = _restart_with_a_subscriber_kept(tmp_path, ())
    try:
        assert pub.send_wait("nobody here") == Delivery.ACCEPTED
        back = ProtonSubscriber(again.url, "kept", name="s", container_id="kept-sub")
        assert pub.send_wait("after") == Delivery.ACCEPTED
        assert back.get(20).body == "after"  # (in publish order: the first would have come first)
        back.close()
    finally:
        pub.close()
        again.stop()
