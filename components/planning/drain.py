"""How long a terminating node may drain: one figure for the handler's drain timeout and the hooks that wait on it.

Every `aws` pool's Auto Scaling group has a terminate lifecycle hook: the group holds a leaving instance in
`Terminating:Wait` until the node termination handler, having cordoned and drained the node, completes the lifecycle
action, or until the hook's heartbeat timeout passes and the default result (CONTINUE) applies (EC2 Auto Scaling
user guide, How lifecycle hooks work, https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html).
The handler's drain gives up after its `nodeTerminationGracePeriod` ([NTH] v1.25.6 pkg/node/node.go: the drain
helper's `Timeout`), and an ASG lifecycle event is drained at once (its start time is the event's own). So the hook
waits the drain timeout plus a margin for the event's trip through EventBridge and the queue, the node lookup and the
CompleteLifecycleAction call: a drain that finishes is never cut short by the hook.
"""

from __future__ import annotations

#: Queue delivery, the handler's poll, node lookup and cordon before the drain starts, and the completion after.
HOOK_MARGIN_SECONDS = 120
#: A lifecycle hook's heartbeat timeout ranges from 30 to 7200 seconds (PutLifecycleHook `HeartbeatTimeout`).
HOOK_MAX_SECONDS = 7200


def hook_timeout_seconds(drain_timeout_seconds: int) -> int:
    """The terminate hook's heartbeat timeout for a drain timeout (config: `nodeTerminationHandler.
    drainTimeoutSeconds`, at most 7080, so the sum stays within the hook's 7200 s)."""
    timeout = drain_timeout_seconds + HOOK_MARGIN_SECONDS
    if timeout > HOOK_MAX_SECONDS:
        raise ValueError(f"a {drain_timeout_seconds} s drain needs a {timeout} s hook; hooks wait {HOOK_MAX_SECONDS} s")
    return timeout
