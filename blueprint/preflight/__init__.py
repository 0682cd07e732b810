"""`blueprint preflight`: read-only AWS calls that say, before `pulumi up`, whether the account can take the stack.

`needs` derives what to ask from the validated config and the offline plan, `evaluate` turns the account's answers
into findings (pure), `account` makes the calls with botocore, `command` is the CLI (docs/operations.md,
"Preflight").
"""
