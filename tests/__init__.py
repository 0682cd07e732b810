"""The test suite, a package so that `tests.policies` never shadows the project's `policies` package."""
