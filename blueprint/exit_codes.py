"""The `blueprint` command's exit codes: one table for every subcommand, printed by `--help` and in the docs.

0-2 keep their meaning from before (a script tests `== 1` for violations and `== 2` for a bad stack file); a mistake
on the command line and a file that cannot be read or written get codes of their own, from BSD's sysexits(3)
(EX_USAGE, EX_IOERR), so none of them can pass for a violation or a bad config. A signal ends the command with the
shell's 128 + N (bash manual, "Exit Status"). Sources in docs/operations.md#exit-codes.
"""

from __future__ import annotations

import textwrap

OK = 0
#: A mandatory policy violation (`check`), a check that failed or could not run (`verify`), a stale generated file
#: (`schema --check`).
FAILED = 1
#: The stack file (or the policy config) says something invalid: every problem with its key path, on stderr.
CONFIG = 2
#: sysexits EX_USAGE: an unknown subcommand or option, a missing --stack/--config, an option value out of range.
USAGE = 64
#: sysexits EX_IOERR: a file named on the command line cannot be read or written, or verify cannot reach the cluster.
IO = 74
#: 128 + SIGINT: Ctrl-C (or, for `verify`, SIGTERM; its test pods are deleted first).
INTERRUPTED = 130
#: 128 + SIGPIPE: the reader of stdout closed it early (`blueprint plan --format json | head -1`); nothing printed.
BROKEN_PIPE = 141

MEANING = {
    OK: "success",
    FAILED: "a mandatory policy violation (check), a failed check (verify), a stale generated file (schema --check)",
    CONFIG: "an invalid stack or policy config (every problem on stderr with its key path)",
    USAGE: "a usage error: unknown subcommand or option, no --stack/--config, a bad option value",
    IO: "an I/O error: a file cannot be read or written, or (verify) the cluster cannot be reached",
    INTERRUPTED: "interrupted (Ctrl-C)",
    BROKEN_PIPE: "stdout closed early (e.g. piped to head)",
}


#: What any subcommand can end with, whatever it does.
COMMON = (OK, USAGE, IO, INTERRUPTED, BROKEN_PIPE)


def describe(specific: dict[int, str] | None = None) -> str:
    """`exit codes:` and one line per code, for an argparse epilog: every code when `specific` is None, else the
    common ones and `specific`'s, its texts replacing the general meanings ("" keeps the general one)."""
    codes = dict.fromkeys(MEANING, "") if specific is None else {**dict.fromkeys(COMMON, ""), **specific}
    lines = (
        textwrap.fill(codes[code] or MEANING[code], 79, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7)
        for code in sorted(codes)
    )
    return "exit codes:\n" + "\n".join(lines)
