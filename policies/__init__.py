"""The gpu-clusters policy pack: rules (`policies.rules`), their SDK wrappers (`policies.pack`), and `__main__`,
which serves them to the Pulumi engine. Import `policies.pack`, never `policies.__main__` (it serves forever)."""
