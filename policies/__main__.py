"""Entry point of the policy pack: builds the `PolicyPack`, which serves the policies to the Pulumi engine.

The constructor never returns (it runs the analyzer's gRPC server), so nothing else lives here: the policies are in
`policies.pack`, the logic in `policies.rules`.
"""

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.pack import PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.ADVISORY)
