"""A stuck consumer is bounded (issue 49, item 10): a subscriber that takes deliveries and
answers none held its publishers' answers for as long as it stayed connected. Past
``subscriber_stall`` it is treated as gone: its link ends (``once:subscriber-stalled``),
its subscription suspended for its grace, and then its
publishers hear accepted without it, while a monitor on another topic goes on. Real Proton
clients on a real router process."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import pytest
import yaml
from once.tools.topology_ports import free_port
from proton import Delivery
from proton.utils import BlockingConnection, LinkDetached
from support.monitor import Monitor
from support.proton_clients import ProtonPublisher
from support.routers import RouterProcess


def test_a_subscriber_that_answers_nothing_while_it_holds_deliveries_is_treated_as_gone(tmp_path: Path):
    doc = {"routers": {"A": {"listen": f"127.0.0.1:{free_port()}", "http": f"127.0.0.1:{free_port()}"}},
           "links": [], "settings": {"subscriber_stall": "2s", "subscriber_grace": "2s"}}
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(doc))
    r = RouterProcess(tmp_path / "topology.yaml")
    try:
        stuck_conn = BlockingConnection(r.url, timeout=30)
        stuck = stuck_conn.create_receiver("jobs", name="stuck", credit=1)
        monitor = Monitor(r.url)
        monitor.progresses()
        pub = ProtonPublisher(r.url, "jobs")
        outcomes: list[object] = []
        sender = threading.Thread(target=lambda: outcomes.append(pub.send_wait("job")), daemon=True)
        sender.start()
        assert stuck.receive(timeout=30).body == "job"  # it holds the job, and never answers
        with pytest.raises(LinkDetached) as detached:
            while True:  # (Proton raises when the router's detach comes)
                stuck.receive(timeout=60)
        assert "once:subscriber-stalled" in str(detached.value) and "subscriber_stall" in str(detached.value)
        sender.join(60)
        assert outcomes == [Delivery.ACCEPTED]  # (its grace ran out: accepted without it)
        monitor.progresses()
        assert r.http is not None
        with urllib.request.urlopen(f"{r.http}/api/router", timeout=30) as resp:
            assert json.loads(resp.read())["totals"]["stalled_subscribers"] == 1
        assert any("answered nothing for 2 s while it held" in line for line in r._log)
        monitor.close()
        pub.close()
        stuck_conn.close()
    finally:
        r.stop()
