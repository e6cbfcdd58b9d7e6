"""A core as an adaptor drives it: each call a test makes is a batch of its own.

The core calls no port inside an entry call (``router/core/effects.py``): what a call
decided reaches the ports when the adaptor ends its batch with ``after_batch``. A test
that reads its ports after each call, as a client reads the wire, drives the core
through this: every method called on it is followed by ``after_batch``.
``test_effects.py`` drives the core bare, batches of several calls included.
"""

from __future__ import annotations

from typing import Any


class Batched:
    __slots__ = ("_target", "_core")

    def __init__(self, target: Any, core: Any = None) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_core", core if core is not None else target)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value) or name.startswith("_") or name == "after_batch" or isinstance(value, type):
            return value
        core = self._core

        def call(*args: Any, **kwargs: Any) -> Any:
            out = value(*args, **kwargs)
            core.after_batch()
            return out

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    @property
    def bare(self) -> Any:
        """The core (or object) itself, for what must not end a batch."""
        return self._target


def batched(target: Any, core: Any = None) -> Any:
    return Batched(target, core)
