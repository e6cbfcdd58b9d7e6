"""``once user add|remove NAME --file PATH``: the users file's entries (salted SCRAM hashes;
``router/security/users.py``). The password is asked for twice on a terminal, or read as one line
from standard input (``echo "$PW" | once user add alice --file users.yaml``); it is never an
argument, where ``ps`` and shell histories would show it."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path

from once.router.security.users import UsersError, add_user, remove_user

from .exits import CommandError, Exit


def _password(name: str) -> str:
    if sys.stdin.isatty():
        first = getpass.getpass(f"password for {name}: ")
        if getpass.getpass("again: ") != first:
            raise CommandError(Exit.USAGE, "the two passwords differ: nothing written")
        password = first
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CommandError(Exit.USAGE, "an empty password: nothing written")
    return password


def user(action: str, name: str, file: str, groups: list[str]) -> int:
    path = Path(file)
    if not name or any(c.isspace() or c == ":" for c in name):
        raise CommandError(Exit.USAGE, f"user name {name!r}: no spaces or ':'")
    try:
        if action == "add":
            # (no --group: a replaced entry keeps its groups)
            replaced = add_user(path, name, _password(name), tuple(groups) if groups else None)
            print(f"{'replaced' if replaced else 'added'} {name} in {path} (SCRAM-SHA-256 and -512 hashes; "
                  "`kill -HUP` a running router to take it up)", file=sys.stderr)
        elif not remove_user(path, name):
            raise CommandError(Exit.USAGE, f"{path}: no user {name}")
        else:
            print(f"removed {name} from {path}", file=sys.stderr)
    except UsersError as e:
        raise CommandError(Exit.USAGE, str(e)) from None
    except OSError as e:
        raise CommandError(Exit.USAGE, f"{path}: cannot write: {e.strerror}") from None
    return Exit.OK
