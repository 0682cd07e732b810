"""Which GPU platform add-ons a stack gets, and the values each one is installed with (pure, no Pulumi).

The add-on components (`components/addons/`) only turn these values into resources; everything a reviewer checks
(tolerations, selectors, time-slicing, IAM statements, event patterns, alarms) is computed here from the config and
the pools' `PoolPlan`s. One module per add-on, plus `selection`, `placement`, `alarms` and `documents`; importers
name the module they need. See docs/addons.md.
"""
