"""Programs that run inside the cluster rather than on the deployer's machine: the reference training script and the
node health loop. Each is shipped to its pods from this package (a ConfigMap of the module's source), runs on a
pinned public image, and is tested here like the rest of the project.
"""
