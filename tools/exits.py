"""How every ``once`` command ends: one table of exit codes, and the one-line failure.

A command that cannot do its job raises ``CommandError`` with the code and a line that
names what is wrong and what to do; ``tools/cli.py`` prints ``once COMMAND: LINE`` on
stderr and exits with the code. No traceback reaches the operator.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1  # the command ran, and what it checks failed (a message not accepted, a violation)
    USAGE = 2  # bad arguments or a bad topology / scenario file
    ADDRESS = 3  # cannot listen where asked (address in use, or not this host's)
    UNREACHABLE = 4  # no router answers where the command was pointed
    TIMEOUT = 5  # the router did not answer in time
    LOST = 6  # the router went away while the command was using it
    REFUSED = 7  # the router refused it: not authorized, or over a limit of its policy
    SOFTWARE = 70  # a bug of ours (sysexits' EX_SOFTWARE): the line says what, ONCE_DEBUG=1 shows where
    INTERRUPTED = 130  # Ctrl-C


class CommandError(Exception):
    def __init__(self, code: Exit, line: str) -> None:
        super().__init__(line)
        self.code = code
        self.line = line
