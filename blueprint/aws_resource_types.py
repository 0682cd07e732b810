"""The AWS provider's resource types (type token, whether they take `tags`), read from the pinned provider SDK
once and kept in `policies/aws-resource-types.json` (policies/aws_resource_types.py).

The `cost-allocation-tags` rule used to import the SDK module of each type it met to read its constructor (a second
for `ec2` and `iam`, in every `pulumi preview` and `blueprint check`), and a test imported a dozen of them for their
type tokens; both read this table now. Reading the whole SDK takes twenty seconds, so the table has a command of its
own, run after the provider's pin moves: `python -m blueprint.aws_resource_types --write`; `--check` fails when the
installed `pulumi_aws` says otherwise (CI's `generated` step, `.ci/config-reference`), and a test fails when the
table was read from another `pulumi_aws`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import sys
from importlib import metadata
from typing import Any

from blueprint.exit_codes import FAILED, OK, USAGE
from policies.aws_resource_types import PATH, key

ROOT = PATH.parents[1]


def derive() -> dict[str, Any]:
    """The table: for every class of the SDK with a resource constructor (`_internal_init`), by `key`, its type
    token and whether that constructor takes `tags`."""
    import pulumi_aws

    submodules = sorted(m.name for m in pkgutil.iter_modules(pulumi_aws.__path__) if not m.name.startswith("_"))
    modules = ["index", *submodules]
    types: dict[str, dict[str, Any]] = {}
    for module in modules:
        package = importlib.import_module("pulumi_aws" if module == "index" else f"pulumi_aws.{module}")
        getattr(package, "__all__", None)  # a lazy module of the SDK loads on the first attribute asked of it
        for name, value in sorted(vars(package).items()):
            init = getattr(value, "_internal_init", None) if inspect.isclass(value) else None
            if init is not None:
                tags = "tags" in inspect.signature(init).parameters
                types[key(module, name)] = {"tags": tags, "token": getattr(value, "pulumi_type", None)}
    return {"pulumiAws": metadata.version("pulumi_aws"), "types": types}


def text() -> str:
    """The table as JSON, one type a line (a provider upgrade's diff shows the types it adds, drops or changes)."""
    table = derive()
    entries = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(table["types"].items())]
    types = ",\n".join(entries)
    return f'{{\n "pulumiAws": {json.dumps(table["pulumiAws"])},\n "types": {{\n{types}\n }}\n}}\n'


def write() -> None:
    PATH.write_text(text())


def stale() -> list[str]:
    """policies/aws-resource-types.json, when it differs from what the installed provider SDK says."""
    if PATH.exists() and PATH.read_text() == text():
        return []
    return [str(PATH.relative_to(ROOT))]


def main(argv: list[str]) -> int:
    """`--write` the table, or `--check` it (exit 1, saying what to run, when it is stale)."""
    if argv == ["--write"]:
        write()
        return OK
    if argv == ["--check"]:
        out = stale()
        for path in out:
            print(f"{path} is out of date; run `python -m blueprint.aws_resource_types --write`", file=sys.stderr)
        return FAILED if out else OK
    print("usage: python -m blueprint.aws_resource_types --write | --check", file=sys.stderr)
    return USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
