"""gpu-admission: policy-as-code admission for Kubernetes GPU workloads."""

__version__ = "0.1.0"
