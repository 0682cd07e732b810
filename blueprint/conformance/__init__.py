"""`blueprint conformance`: the stack's Kubernetes AI Conformance self-assessment (PRODUCT.yaml) and the upstream
conformance tests run against its cluster (docs/conformance.md)."""
