"""What the other parts call on the forwarding part for protocol version 2's parked
records and hand-over markers: version 3 (``copies.py``) has neither, and answers with
nothing. Its base class, so that ``Copies`` holds only what version 3 does."""

from __future__ import annotations

from typing import Any

from .peers import CoreRecord, Hop


class WithoutParkingOrMarkers:
    __slots__ = ()

    def answer_keyed(self, record: CoreRecord) -> None:
        pass

    def forget_parked(self, record: CoreRecord) -> None:
        pass

    def parked_given_up(self, record: CoreRecord, keep: frozenset[str]) -> None:
        pass

    def parked_since(self) -> list[tuple[CoreRecord, float]]:
        return []

    def retry_parked(self) -> None:
        pass

    def marker_hops(self, target: str) -> list[Hop]:
        return []

    def queue_marker(self, hop: Hop, marker: Any) -> None:
        pass

    def hold_marker(self, target: str, marker: Any) -> bool:
        return False
