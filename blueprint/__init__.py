"""The tooling around the library: the `blueprint` CLI, the offline plan (runner, mocks, summary, rendering) and
the policy check over a plan.

It imports `components` (the library that `pulumi up` runs) and `policies`; neither of them imports it back.
"""
