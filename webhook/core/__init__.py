"""The pure core: no I/O, no clock, no HTTP, YAML or Kubernetes client."""
