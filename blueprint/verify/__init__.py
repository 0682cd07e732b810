"""`blueprint verify`: check a deployed cluster against what its stack's plan promised.

One module per check (`nodes`, `allocatable`, `daemons`, `topology`, `dcgm`, `nccl`, `storage`), the expectations
they compare against (`expectations`, derived from the same pool plans and catalog as `blueprint plan`), the pure
parsers of the tools' output (`parsers`), the test pods (`pods`), the Kubernetes API behind a small protocol
(`kube`), the runner (`runner`) and the rendering (`render`).
"""
