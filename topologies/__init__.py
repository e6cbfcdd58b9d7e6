"""The shipped topologies and failover scenarios, as package data: ``once launch NAME``
and ``once router NAME`` find ``NAME.yaml`` here when NAME is not a file."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def resolve(name: str) -> str:
    """A topology file: ``name`` itself if it is a file, else the shipped one of that name."""
    if Path(name).is_file():
        return name
    shipped = files("once.topologies") / (name if name.endswith(".yaml") else f"{name}.yaml")
    if shipped.is_file():
        return str(shipped)
    return name  # (loading it says it cannot be read, in one line)


def resolve_scenario(name: str) -> str:
    """A failover scenario: ``name`` itself if it is a file, else the shipped one of that name
    (``once harness publisher-router-dies`` from any directory, checkout or installed copy)."""
    if Path(name).is_file():
        return name
    shipped = files("once.topologies") / "scenarios" / (name if name.endswith(".yaml") else f"{name}.yaml")
    if shipped.is_file():
        return str(shipped)
    return name



def shipped_scenarios() -> list[str]:
    """The names of the shipped failover scenarios (``once harness NAME``)."""
    return sorted(p.name.removesuffix(".yaml") for p in (files("once.topologies") / "scenarios").iterdir()
                  if p.name.endswith(".yaml"))
