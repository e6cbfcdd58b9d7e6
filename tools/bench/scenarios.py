"""What ``once bench`` runs (scenarios) and what it reports (one ``Result`` per scenario)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    topology: str
    publisher: str  # router the publisher attaches to
    subscribers: tuple[str, ...]  # router of each subscriber
    # another client's sender links that attach and never send (on one connection, in
    # sessions of 1000): what they cost the publisher that does send
    idle_links: int = 0
    group: bool = False  # the subscribers are one consumer group: each message goes to one
    window: int = 0  # at most this many unanswered at the publisher (0: as the credit allows)
    max_messages: int = 0  # a cap on --messages (a one-in-flight run is slow by design)


SCENARIOS = {
    "single-1to1": Scenario("single.yaml", "A", ("A",)),
    "single-1to3": Scenario("single.yaml", "A", ("A",) * 3),
    "single-1to4": Scenario("single.yaml", "A", ("A",) * 4),
    "line3-1to1": Scenario("line3.yaml", "A", ("C",)),
    "mesh3-fanout": Scenario("mesh3.yaml", "A", ("A",) * 3 + ("B",) * 3 + ("C",) * 3),
    "single-idle2000": Scenario("single.yaml", "A", ("A",), idle_links=2000),
    "single-group4": Scenario("single.yaml", "A", ("A",) * 4, group=True),
    "line3-group": Scenario("line3.yaml", "A", ("A", "B", "C"), group=True),
    # one message in flight: the latency of send -> accepted with no queue anywhere
    "single-ping": Scenario("single.yaml", "A", ("A",), window=1, max_messages=20_000),
}
DEFAULT_SCENARIOS = ("single-1to1", "single-1to4", "line3-1to1", "mesh3-fanout")


@dataclass
class Result:
    scenario: str
    msgs_per_s: float
    p50_ms: float  # publisher: send -> accepted (the router answers when every subscriber accepted)
    p99_ms: float
    messages: int
    subscribers: int
    through_router: bool
    credit: int
    # a consumer group's members: the share of the messages each got, in attach order
    shares: tuple[float, ...] = ()
    clients: str = "python"
    e2e_p50_ms: float | None = None  # subscriber: send -> arrival (C clients only)
    e2e_p99_ms: float | None = None
    router_cpu_us: float | None = None  # router CPU per message, summed over the routers
    router_peak_rss_mib: float | None = None  # the largest router's peak resident memory
