"""No secret in clear where it is not a secret: the offline plan, node user data and plain stack outputs.

The hybrid stack's SSM activation code (offline: the mocks' `offline-activation-code`) reaches the servers only in
each pool's NodeConfig, a secret stack output."""

from __future__ import annotations

import base64
import json

from blueprint.plan.monitor import SECRET
from tests.builders import LAUNCH_TEMPLATE, ShippedStack

ACTIVATION_CODE = "offline-activation-code"  # what the offline mocks answer for aws.ssm.Activation.activationCode


def test_the_activation_code_is_nowhere_in_the_hybrid_plan(hybrid_stack: ShippedStack) -> None:
    assert ACTIVATION_CODE not in json.dumps(hybrid_stack.plan)
    # No resource takes the code as an input; the activation names it only among its secret outputs.
    assert "activationCode" not in json.dumps([r["inputs"] for r in hybrid_stack.plan["resources"]])
    named = {r["name"] for r in hybrid_stack.plan["resources"] if "activationCode" in json.dumps(r)}
    assert named == {r["name"] for r in hybrid_stack.plan["resources"] if r["type"] == "aws:ssm/activation:Activation"}


def test_only_the_secret_outputs_carry_credentials(hybrid_stack: ShippedStack) -> None:
    plain = {k: v for k, v in hybrid_stack.exports.items() if not k.startswith("hybridNodeConfig-")}
    assert plain and "kubeconfig" in plain
    assert ACTIVATION_CODE not in json.dumps(plain, default=str)
    assert hybrid_stack.run.registrations  # the run the exports come from


def test_node_user_data_carries_no_token_or_activation(training_stack: ShippedStack) -> None:
    templates = training_stack.run.of_type(LAUNCH_TEMPLATE)
    assert templates
    for template in templates:
        user_data = base64.b64decode(template.inputs["userData"]).decode()
        for word in ("activationCode", "token:", "aws_secret_access_key", SECRET):
            assert word not in user_data
