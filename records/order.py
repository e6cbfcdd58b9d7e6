"""Per-destination order across route changes: pins and the held queue (pure data).

Per-publisher order must survive a change of routes under load: if a destination router
switched to its new route at once, newer deliveries could overtake older ones still on
the old path. So a destination stays *pinned* to the neighbours it has deliveries in
flight through until they have answered; and a delivery that may not take the one path
its older siblings are on (back where it came from) is *held* here until they have come
back through us or been answered, then goes in publish order.

``DestinationOrder`` only decides: the core asks it where to send (``steer``), tells it
what went where (``pin``/``unpin``) and what it holds (``hold``), and gets back what may go
now (``release``). It sends nothing itself, so it is tested without a core.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HeldDelivery:
    """A record held for one destination: sent on once older ones have cleared."""

    stamp: float  # the root's stamp: publish order
    record: Any
    came_from: str | None  # the neighbour it came from (and may not go back to)
    keys: frozenset[tuple[str, str]] | None  # a copy for particular subscribers only


@dataclass(frozen=True, slots=True)
class HeldMarker:
    """A hand-over marker: it goes behind every delivery held before it."""

    marker: Any
    stamp: float = math.inf


HeldEntry = HeldDelivery | HeldMarker


def _stamp(entry: HeldEntry) -> float:
    return entry.stamp


class DestinationOrder:
    def __init__(self) -> None:
        # destination router -> {neighbour: deliveries in flight there}, oldest path first
        self.pins: dict[str, dict[str, int]] = {}
        # destination router -> what waits here for it, in publish order (markers last)
        self.held: dict[str, list[HeldEntry]] = {}

    def __bool__(self) -> bool:
        return bool(self.pins or self.held)

    # ------------------------------------------------------------- routing

    def steer(self, by_hop: dict[str, set[str]], came_from: str | None,
              live: Container[str]) -> tuple[dict[str, set[str]], set[str] | None]:
        """The routes ``by_hop`` (neighbour -> destinations) adjusted to keep order, and the
        destinations to hold here for now. ``live``: the neighbours we have links to.

        A destination stays on a neighbour it has deliveries in flight through (with
        several, the oldest path wins); one whose older deliveries went back to
        ``came_from`` (its routes changed under it) is held, as is one with deliveries
        held already."""
        pins = self.pins
        held = self.held
        if not pins and not held:
            return by_hop, None
        moved = None
        hold = None
        for peer, ds in by_hop.items():
            for d in ds:
                pin = pins.get(d)
                if d in held or pin is not None and came_from in pin and came_from in live and not any(
                        p in live and p != came_from for p in pin) and peer != came_from:
                    if hold is None:
                        hold = set()
                    hold.add(d)
                    continue
                if pin is None or peer in pin and len(pin) == 1:
                    continue
                target = next((p for p in pin if p in live and p != came_from), None)
                if target is not None and target != peer:
                    if moved is None:
                        moved = []
                    moved.append((peer, d, target))
        if moved is None and hold is None:
            return by_hop, None  # the usual case: every destination already on its routed neighbour
        out = {peer: set(ds) for peer, ds in by_hop.items()}
        for peer, d, target in moved or ():
            out[peer].discard(d)
            out.setdefault(target, set()).add(d)
        for ds in out.values():
            ds -= hold or set()
        return {peer: ds for peer, ds in out.items() if ds}, hold

    def paths(self, dest: str) -> Iterable[str]:
        """The neighbours with deliveries for ``dest`` in flight."""
        return self.pins.get(dest, ())

    # ---------------------------------------------------------------- pins

    def pin(self, dest: str, peer: str) -> None:
        pin = self.pins.get(dest)
        if pin is None:
            self.pins[dest] = {peer: 1}
        else:
            pin[peer] = pin.get(peer, 0) + 1

    def unpin(self, peer: str, dests: Iterable[str]) -> list[str]:
        """One delivery for each of ``dests`` on ``peer`` was answered; returns the
        destinations with nothing left in flight on ``peer`` (held ones may go now)."""
        cleared = []
        for d in dests:
            pin = self.pins.get(d)
            if pin is not None and peer in pin:
                pin[peer] -= 1
                if pin[peer] <= 0:
                    del pin[peer]
                    if not pin:
                        del self.pins[d]
                    cleared.append(d)
        return cleared

    def drop_peer(self, peer: str) -> None:
        """The link to ``peer`` is gone: nothing is in flight there any more."""
        for d in [d for d, pin in self.pins.items() if peer in pin]:
            del self.pins[d][peer]
            if not self.pins[d]:
                del self.pins[d]

    # ---------------------------------------------------------------- held

    def hold(self, dest: str, entry: HeldDelivery) -> None:
        # In publish order: one that came back to us is older than what waits for it.
        bisect.insort(self.held.setdefault(dest, []), entry, key=_stamp)

    def hold_marker(self, dest: str, marker: Any) -> bool:
        """Keep a marker behind what is held for ``dest``; False if nothing is."""
        queue = self.held.get(dest)
        if not queue:
            return False
        queue.append(HeldMarker(marker))
        return True

    def release(self, dest: str, live: Container[str]) -> list[HeldEntry]:
        """What waits for ``dest`` and may go now, in order: all of it once nothing older is
        still out with a live neighbour one of them waited on; else nothing."""
        queue = self.held.get(dest)
        if not queue:
            return []
        pin = self.pins.get(dest) or {}
        if any(type(e) is HeldDelivery and e.came_from in pin and e.came_from in live for e in queue):
            return []
        del self.held[dest]
        return queue
