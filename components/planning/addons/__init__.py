"""Which GPU platform add-ons a stack gets, and the values each one is installed with (pure, no Pulumi).

The add-on components (`components/addons/`) only turn these values into Helm releases, IAM roles, queues and
alarms. Everything a reviewer wants to check (tolerations, selectors, time-slicing entries, IAM statements,
EventBridge patterns, alarm thresholds and steps) is computed here from the validated config and the pools'
`PoolPlan`s, so it is derived once and unit-testable without mocks.

One module per add-on (`device_plugins`, `cluster_autoscaler`, `interruption`, `keda`, `monitoring`), plus
`selection` (which add-ons a stack gets), `placement` (selectors and tolerations every add-on shares), `alarms`
(the planned CloudWatch alarm) and `documents` (stable JSON). Importers name the module they need.
"""
