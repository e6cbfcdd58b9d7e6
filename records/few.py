"""A map for the usual one entry: a record's waiters and its unsettled deliveries.

A ``dict`` holding one entry is 224 bytes (a 64-byte object and a 160-byte table), and a
record held for its one subscriber carried two (``states``, ``unsettled``). ``Few`` holds its
first entry in two slots and only the rest in a dict: 56 bytes for the usual record. It has the part of the dict
interface the core uses; keys compare as a dict's do (``is``, then ``==``). Its order is
insertion order while nothing is removed (``items`` gives the inline entry first).

Written here rather than taken from a library: nothing maintained offers a small-map with
slots that mypyc compiles to a native class (the point: compiled, each call is C).

Not ``Generic``: mypyc gives a class with ``Generic[...]`` among its bases a ``__dict__`` and a
``__weakref__`` slot (16 bytes more on each of two per record), so keys and values are ``Any``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

_ABSENT: Any = object()


class Few:
    __slots__ = ("key", "value", "more")

    def __init__(self) -> None:
        self.key: Hashable | None = None  # the inline entry's key (None: no inline entry)
        self.value: Any = None
        self.more: dict[Any, Any] | None = None  # the other entries

    def _inline(self, key: Any) -> bool:
        k = self.key
        return k is not None and (k is key or k == key)

    def get(self, key: Any, default: Any = None) -> Any:
        if self._inline(key):
            return self.value
        more = self.more
        return more.get(key, default) if more is not None else default

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.key is None:
            more = self.more
            if more is None or key not in more:
                self.key, self.value = key, value
                return
        elif self._inline(key):
            self.value = value
            return
        more = self.more
        if more is None:
            more = self.more = {}
        more[key] = value

    def pop(self, key: Any, default: Any = None) -> Any:
        if self._inline(key):
            value = self.value
            self.key = self.value = None
            return value
        more = self.more
        return more.pop(key, default) if more is not None else default

    def __delitem__(self, key: Any) -> None:
        if self.pop(key, _ABSENT) is _ABSENT:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        k = self.key
        if k is not None and (k is key or k == key):
            return True
        more = self.more
        return more is not None and key in more

    def __len__(self) -> int:
        more = self.more
        return (self.key is not None) + (len(more) if more is not None else 0)

    def __bool__(self) -> bool:
        return self.key is not None or bool(self.more)

    def __iter__(self) -> Iterator[Any]:
        k = self.key
        if k is not None:
            yield k
        if self.more:
            yield from self.more

    def items(self) -> list[tuple[Any, Any]]:
        out: list[tuple[Any, Any]] = []
        k = self.key
        if k is not None:
            out.append((k, self.value))
        if self.more:
            out.extend(self.more.items())
        return out

    def clear(self) -> None:
        self.key = self.value = None
        self.more = None

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items()) + "}"
