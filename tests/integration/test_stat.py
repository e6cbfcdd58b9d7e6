"""``once stat`` against running routers (issue 25): tables for people, JSON for scripts,
one line and an exit code when there is no router to ask."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.proton_clients import ProtonPublisher, ProtonSubscriber
from support.routers import ROOT, Network, masked

ACCEPTED = 36


def once(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "once.tools.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def mesh3(tmp_path):
    net = Network("mesh3.yaml", tmp_path)
    yield net
    net.stop()


def test_stat_shows_the_three_routers_and_the_topics_of_a_mesh(mesh3):
    sub = ProtonSubscriber(mesh3["C"].url, "orders", name="audit")
    pub = ProtonPublisher(mesh3["B"].url, "orders")
    assert pub.send_wait("o1") == ACCEPTED
    assert sub.get(timeout=10).body == "o1"
    done = once("stat", "-n", "-a", "--router", mesh3["A"].http)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    network, topics = out.split("\ntopics (")
    seen = network.split("\nlinks:")[0]
    rows = {line.split()[0]: line.split()[1:] for line in seen.splitlines() if line[:1] in "ABC" and " " in line}
    assert rows["A"] == ["this", "one"] and rows["B"] == ["yes"] and rows["C"] == ["yes"]
    assert "A     B      1" in network and "B     C      1" in network and "A     C      1" in network
    orders = next(line.split() for line in topics.splitlines() if line.startswith("orders "))
    assert orders[:5] == ["orders", "0", "0", "0", "C"]  # no publisher or subscriber at A; one at C
    at_b = json.loads(once("stat", "-a", "--json", "--router", mesh3["B"].http).stdout)
    assert [(t["topic"], t["publishers"], t["received"], t["routers"]) for t in at_b] == [("orders", 1, 1, ["C"])]
    both = json.loads(once("stat", "-n", "-s", "--json", "--router", mesh3["C"].http).stdout)
    assert [s["name"] for s in both["subscribers"]["local"]] == ["audit"]
    assert {r["router"] for r in both["network"]["routers"]} == {"A", "B", "C"}
    sub.close()
    pub.close()


def test_stat_without_a_router_says_so_in_one_line():
    from once.tools.topology_ports import free_port

    done = once("stat", "--router", f"127.0.0.1:{free_port()}")
    assert done.returncode == 4 and len(done.stderr.splitlines()) == 1 and "cannot reach" in done.stderr
    done = once("stat", "--router", "http://127.0.0.1:http")
    assert done.returncode == 2 and "port is not a number" in done.stderr
    done = once("stat", "--router", f"amqp://127.0.0.1:{free_port()}")  # (its $management node: none there)
    assert done.returncode == 4 and len(done.stderr.splitlines()) == 1 and "cannot connect" in done.stderr
    done = once("stat", "--router", "ftp://127.0.0.1:21")
    assert done.returncode == 2 and "http endpoint" in done.stderr and "amqp://" in done.stderr


def test_stat_names_an_exclusive_groups_active_member_from_a_third_router(mesh3):
    from support.proton_options import SharedSubscription

    first = ProtonSubscriber(mesh3["B"].url, "ledger", name="ledger|global", container_id="app-b",
                             options=SharedSubscription(exclusive=True))
    second = ProtonSubscriber(mesh3["C"].url, "ledger", name="ledger|global", container_id="app-c",
                              options=SharedSubscription(exclusive=True))
    assert first.attach_properties == {"once:active": True} and second.attach_properties == {"once:active": False}
    from support.routers import wait_for

    def group() -> dict | None:
        subs = json.loads(once("stat", "-s", "--json", "--router", mesh3["A"].http).stdout)
        found = [g for g in subs["groups"] if g["group"] == "ledger"]
        return found[0] if found and len(found[0]["members"]) == 2 else None

    g = wait_for(group, timeout=15, what="both members seen at A")
    # (anonymous clients' container ids are shown as digests: ``auth.http`` is off)
    assert {(m["router"], m["container"], m["active"]) for m in g["members"]} == {("B", masked("app-b"), True),
                                                                                 ("C", masked("app-c"), False)}
    table = once("stat", "-s", "--router", mesh3["A"].http).stdout
    assert f"B:{masked('app-b')}/ledger|global*" in table and f"C:{masked('app-c')}/ledger|global*" not in table
    first.close()
    second.close()
