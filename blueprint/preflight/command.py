"""`blueprint preflight --stack NAME`: plan the stack offline, ask the account, print the findings."""

from __future__ import annotations

import argparse
import json
from typing import Any

from blueprint import terminal
from blueprint.exit_codes import FAILED, IO, OK
from blueprint.preflight.findings import Finding, failed

#: How each status is shown in the table.
STYLES = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}


def session_clients(region: str) -> Any:
    """`service -> client` over one botocore session: the default credential chain (environment, shared files,
    SSO, container and instance roles), in the stack's Region. Raises NoCredentialsError when there are none."""
    import botocore.session
    from botocore.exceptions import NoCredentialsError

    session = botocore.session.get_session()
    if session.get_credentials() is None:
        raise NoCredentialsError()
    made: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in made:
            made[service] = session.create_client(service, region_name=region)
        return made[service]

    return client


def preflight(args: argparse.Namespace) -> int:
    """Exit OK when every check passes (warnings and skips included), FAILED when any fails, CONFIG for an invalid
    stack, IO when the stack file cannot be read or AWS cannot be reached (no credentials, no network)."""
    from botocore.exceptions import BotoCoreError

    from blueprint.preflight.account import run_checks
    from blueprint.preflight.needs import stack_needs

    needs, code = terminal.reporting(lambda: stack_needs(args.stack, args.config))
    if needs is None:
        return code
    try:
        findings = run_checks(needs, session_clients(needs.region))
    except BotoCoreError as error:
        terminal.error(f"preflight: cannot ask AWS: {error}")
        return IO
    _print(findings, needs.region, args.format)
    return FAILED if failed(findings) else OK


def _print(findings: list[Finding], region: str, fmt: str) -> None:
    if fmt == "json":
        print(
            json.dumps(
                {"region": region, "failed": failed(findings), "findings": [f.to_json() for f in findings]}, indent=2
            )
        )
        return
    from rich.table import Table

    table = Table(title=f"preflight ({region})")
    for column in ("check", "status", "subject", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        table.add_row(f.check, f"[{STYLES[f.status]}]{f.status}[/]", f.subject, f.detail, f.fix)
    terminal.console().print(table)
