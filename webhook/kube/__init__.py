"""The only contact with a live Kubernetes API."""
