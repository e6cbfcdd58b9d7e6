"""Link options for standard Proton clients: what a JMS client would put on its links."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # (also run as a script's import)

from once.tools.clients import SharedSubscription  # noqa: E402

__all__ = ["SharedSubscription"]
