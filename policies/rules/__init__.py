"""The rules of the policy pack, as plain functions over plain data, one module per rule family.

Each resource rule takes one `Resource` and the policy's config and yields violation messages; each stack rule
takes the whole `Stack` and the config and yields `(message, urn)` pairs (`policies.rules.signatures`).
`policies.pack` wraps them as the policy SDK's `ResourceValidationPolicy` / `StackValidationPolicy` objects with
names, descriptions and levels; `blueprint.plan.check` runs those same objects over the offline plan. Nothing here
imports Pulumi's engine, so the rules are cheap to test and read the same everywhere.

Families: `fabric` (EFA), `nodes`, `data`, `control_plane`, `network`, `spot`, `supply_chain`, `cost`. Stack rules
read node pools through `deployed_pools` and Helm releases through `releases`.

Facts come from docs/sources.md: aws-gpu-facts.md (tags such as [EFAD], [BC], [NVDP], [NTH]) or from the AWS page
named next to the rule. Instance facts come from the catalog (`components.catalog`), Lustre sizing steps from the
storage planner (`components.planning.lustre`): one copy of each fact, shared with the components that obey it.
"""
