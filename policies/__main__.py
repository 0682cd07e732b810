"""Entry point of the policy pack: builds the `PolicyPack`, which serves the policies to the Pulumi engine.

The constructor never returns (it runs the analyzer's gRPC server), so nothing else lives here: the policies are in
`policies.pack`, the logic in `policies.rules`.
"""

import sys
from pathlib import Path

# The pack's virtualenv holds only the pinned dependencies (requirements.txt), not this project: the pack imports the
# checkout it sits in (components.catalog, policies.rules), one directory up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.pack import PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.ADVISORY)
