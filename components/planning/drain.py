"""How long a terminating node may drain: one figure for the handler's drain timeout and the hooks that wait on it.

Invariant: every terminate lifecycle hook waits the handler's drain timeout plus a margin, so a drain that finishes
is never cut short by the hook ([NTH]). Why and sources: docs/design-notes.md#how-long-a-node-may-drain.
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
