"""Choose the event loop: uvloop when present (it is a dependency), asyncio otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a declared dependency
        return asyncio.run(main)
    return uvloop.run(main)
