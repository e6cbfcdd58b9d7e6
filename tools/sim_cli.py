"""``once sim``: the in-process network (``once.sim``) from the command line, a thin shell.

``once sim [--seeds A:B | --seed N | --fresh N] [--groups] [--hard] ...`` runs fault
schedules (``once.sim.schedules``); ``once sim explore [--depth N]`` the bounded exhaustive
mode (``once.sim.explore``). A run replays exactly from its seed and the commit only under
one hash seed (set order in the routers follows it), so this runs them under
``PYTHONHASHSEED=0``, starting Python again with it when it is not set so.
"""

from __future__ import annotations

import os
import sys


def sim(args: list[str]) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, "-m", "once.tools.cli", "sim", *args], env)
    if args[:1] == ["explore"]:
        from once.sim.explore import main as explore

        return explore(args[1:])
    from once.sim.schedules import main as schedules

    return schedules(args)
