"""Benchmarks: scripts that time the planning and build paths on synthetic stacks (not part of the test suite)."""
