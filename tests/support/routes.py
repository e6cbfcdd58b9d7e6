"""A routes port for unit tests of the core: what the network would answer, as callables
a test sets (and may change between steps). The core holds this object and calls it; a
test never reaches into the core to change how it routes."""

from __future__ import annotations

from collections.abc import Callable

from once.router.core.ports import Alone


class TestRoutes(Alone):
    __test__ = False  # (not a test class, whatever its name)

    def __init__(self) -> None:
        self.remote: Callable[[str], set[str]] = lambda topic: set()
        self.routing: Callable[[set[str], str | None], tuple[dict[str, set[str]], set[str]]] = \
            lambda dests, exclude: ({}, set(dests))
        self.moves: Callable[[str, str], dict[str, frozenset]] = lambda topic, origin: {}

    def remote_routers(self, topic: str) -> set[str]:
        return self.remote(topic)

    def route(self, dests: set[str], exclude: str | None) -> tuple[dict[str, set[str]], set[str]]:
        return self.routing(dests, exclude)

    def moved(self, topic: str, origin: str) -> dict[str, frozenset]:
        return self.moves(topic, origin)
