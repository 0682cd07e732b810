"""Which AWS provider resource types take `tags`, read from the pinned provider SDK once and kept in
`policies/taggable-types.json` for the `cost-allocation-tags` policy.

The rule used to import the SDK module of each type it met to read its constructor (a second for `ec2` and `iam`,
in every `pulumi preview` and `blueprint check`); it now reads this table. Reading the whole SDK takes twenty
seconds, so the table has a command of its own, run after the provider's pin moves:
`python -m blueprint.taggable_types --write`; `--check` fails when the installed `pulumi_aws` says otherwise (CI's
`generated` step, `.ci/config-reference`), and a test fails when the table was read from another `pulumi_aws`.
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
from policies.rules.cost import TAGGABLE_PATH, taggable_key

ROOT = TAGGABLE_PATH.parents[1]


def derive() -> dict[str, Any]:
    """The table: for every class of the SDK with a resource constructor (`_internal_init`), keyed as
    `taggable_key` keys a type token, whether that constructor takes `tags`."""
    import pulumi_aws

    submodules = sorted(m.name for m in pkgutil.iter_modules(pulumi_aws.__path__) if not m.name.startswith("_"))
    modules = ["index", *submodules]
    types: dict[str, bool] = {}
    for module in modules:
        package = importlib.import_module("pulumi_aws" if module == "index" else f"pulumi_aws.{module}")
        getattr(package, "__all__", None)  # a lazy module of the SDK loads on the first attribute asked of it
        for name, value in sorted(vars(package).items()):
            init = getattr(value, "_internal_init", None) if inspect.isclass(value) else None
            if init is not None:
                types[taggable_key(module, name)] = "tags" in inspect.signature(init).parameters
    return {"pulumiAws": metadata.version("pulumi_aws"), "types": types}


def text() -> str:
    return json.dumps(derive(), indent=1, sort_keys=True) + "\n"


def write() -> None:
    TAGGABLE_PATH.write_text(text())


def stale() -> list[str]:
    """policies/taggable-types.json, when it differs from what the installed provider SDK says."""
    if TAGGABLE_PATH.exists() and TAGGABLE_PATH.read_text() == text():
        return []
    return [str(TAGGABLE_PATH.relative_to(ROOT))]


def main(argv: list[str]) -> int:
    """`--write` the table, or `--check` it (exit 1, saying what to run, when it is stale)."""
    if argv == ["--write"]:
        write()
        return OK
    if argv == ["--check"]:
        out = stale()
        for path in out:
            print(f"{path} is out of date; run `python -m blueprint.taggable_types --write`", file=sys.stderr)
        return FAILED if out else OK
    print("usage: python -m blueprint.taggable_types --write | --check", file=sys.stderr)
    return USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
