"""Where the CLI's output goes and how wide it is: data on stdout at the terminal's width, messages on stderr.

A closed stdout (`blueprint plan --format json | head -1`) and a file that cannot be written end the command with
one line or none, never a traceback (docs/operations.md#exit-codes).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from rich.console import Console

from blueprint.exit_codes import CONFIG, IO, OK
from components.errors import ConfigError

T = TypeVar("T")

#: Columns when COLUMNS is unset and stdout is no terminal (a file, a pipe, a CI log): the plan's pools table keeps
#: most cells on one line, and a log viewer shows it without scrolling sideways.
DEFAULT_WIDTH = 120
#: Below this the tables' columns fold to a character each and rich drops what no longer fits: read it as this.
MIN_WIDTH = 40


def width() -> int:
    """COLUMNS when set, else the width of the terminal on stdout, else DEFAULT_WIDTH (shutil.get_terminal_size);
    never under MIN_WIDTH."""
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


@cache
def _console_class() -> type[Console]:
    """rich's Console with the broken-pipe handling below; rich is imported only when a command prints a table."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """rich's own handling exits 1, which here means a violation: hand the error to `blueprint.cli.main`."""
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "stdout closed")

    return _Console


def console() -> Console:
    """A rich console on stdout at `width()`: tables shrink their columns and fold long cells to fit it."""
    return _console_class()(width=width())


def error(message: str) -> None:
    """One line on stderr, prefixed with the command's name."""
    print(f"blueprint: {message}", file=sys.stderr)


def os_error(error: OSError) -> str:
    """`PATH: reason` for an OSError from the standard library, else its own message (`no stack file ...`)."""
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)


def quiet_stdout() -> None:
    """After a BrokenPipeError, point stdout at /dev/null, so the interpreter's flush at exit raises nothing more
    (the Python docs, signal module, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a file descriptor (a test's capture): nothing to flush later
        pass


def reporting(action: Callable[[], T]) -> tuple[T | None, int]:
    """`action()` and OK; or, when it raises, the problem on stderr and its exit code: an invalid stack file is
    CONFIG, a file that cannot be read is IO."""
    try:
        return action(), OK
    except ConfigError as problem:
        error(str(problem))
        return None, CONFIG
    except OSError as problem:
        error(os_error(problem))
        return None, IO
