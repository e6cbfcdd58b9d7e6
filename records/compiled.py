"""Which build runs: the compiled data path or pure Python.

A regular install (``pip install .``) ships each module setup.py compiles twice: the
``.py`` and the mypyc extension built from it, with a manifest, ``compiled.json`` (module
-> sha256 of the source it was built from; empty, with the reason, when the build fell
back to pure Python). Python's import system prefers an extension to the source beside it;
this module, imported first by every room that holds compiled modules (the rooms'
``__init__``), turns that round and has those modules load from their ``.py`` when

* ``ONCE_PURE`` is set (to anything but ``0``): pure Python on demand, same behaviour
  (the suite holds both builds to it), or
* a source differs from what its extension was built from (edited in place after the
  install): running the old compiled code would be the stale-extension trap.

An editable install (``pip install -e .``) builds no extension and has no manifest: pure
Python, always the source being edited. The decision is taken once, at first import;
``MODE.line()`` is what the router logs at start.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

_PACKAGE = Path(__file__).resolve().parent.parent  # the installed ``once/``
MANIFEST = Path(__file__).resolve().parent / "compiled.json"


@dataclass(frozen=True)
class Mode:
    compiled: bool
    modules: int  # how many modules run compiled
    why: str  # (pure Python) why

    def line(self) -> str:
        if self.compiled:
            return f"compiled data path (mypyc, {self.modules} module{'' if self.modules == 1 else 's'})"
        return f"pure Python ({self.why})"


def source_of(module: str, package: Path = _PACKAGE) -> Path:
    return package.joinpath(*module.split(".")[1:]).with_suffix(".py")


class _Sources(importlib.abc.MetaPathFinder):
    """Finds the named modules' ``.py`` ahead of the extensions beside them."""

    def __init__(self, names: Collection[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, source_of(fullname))


def decide(environ: Mapping[str, str], package: Path = _PACKAGE) -> tuple[Mode, Collection[str]]:
    """The mode of the install at ``package`` (``once/``), and the modules to load from
    source (none when compiled)."""
    manifest_path = package / "records" / MANIFEST.name
    if not manifest_path.exists():
        return Mode(False, 0, "an editable or source install: nothing compiled"), ()
    try:
        manifest = json.loads(manifest_path.read_text())
        modules: dict[str, str] = manifest["modules"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return Mode(False, 0, f"unreadable {manifest_path}: {e}"), ()
    if not modules:
        return Mode(False, 0, str(manifest.get("reason") or "nothing compiled")), ()
    if environ.get("ONCE_PURE", "") not in ("", "0"):
        return Mode(False, 0, "ONCE_PURE is set"), modules
    for name, digest in modules.items():
        try:
            changed = hashlib.sha256(source_of(name, package).read_bytes()).hexdigest() != digest
        except OSError:
            changed = True
        if changed:
            return Mode(False, 0, f"{source_of(name, package)} changed since it was compiled: running the source"), modules
    return Mode(True, len(modules), ""), ()


def _install() -> Mode:
    mode, sources = decide(os.environ)
    if sources:
        sys.meta_path.insert(0, _Sources(sources))
    return mode


MODE = _install()
