"""The node health loop: runs inside the cluster (a Deployment on the system pool), gates new GPU nodes behind a
quick check before they take GPU work, re-checks idle ones, and hands failed nodes to repair. Standard library only,
plus boto3 for the Auto Scaling calls; its names match `components.planning.node_health` (a test holds them equal).
docs/operations.md describes the loop.
"""
