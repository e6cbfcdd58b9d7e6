"""Give a topology free loopback ports: for tests and the bench, which never use fixed ones."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_free_ports(src: str | Path, dst: Path, settings: dict[str, Any] | None = None) -> Path:
    """Copy topology ``src`` to ``dst`` with every listen/inter_router port replaced by a free one."""
    doc = yaml.safe_load(Path(src).read_text())
    for spec in doc["routers"].values():
        spec["listen"] = f"127.0.0.1:{free_port()}"
        if "inter_router" in spec:
            spec["inter_router"] = f"127.0.0.1:{free_port()}"
    if settings:
        doc.setdefault("settings", {}).update(settings)
    dst.write_text(yaml.safe_dump(doc))
    return dst
