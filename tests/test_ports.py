"""The free ports tests and the bench give topologies: never the same one twice."""

from __future__ import annotations

import random
import socket

import pytest
from once.tools import topology_ports


def test_a_port_handed_out_once_is_not_handed_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing binds a port between two picks, so the same random draw twice gave the same port
    # twice: a topology whose listen and mqtt ports were equal failed to start in CI.
    def free_now() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    first, second = free_now(), free_now()
    while second == first:
        second = free_now()
    draws = iter([first, first, first, second])
    monkeypatch.setattr(random, "randrange", lambda lo, hi: next(draws))
    monkeypatch.setattr(topology_ports, "_given", set())
    assert topology_ports.free_port() == first
    assert topology_ports.free_port() == second


def test_many_picks_are_all_distinct() -> None:
    ports = [topology_ports.free_port() for _ in range(500)]
    assert len(set(ports)) == 500
