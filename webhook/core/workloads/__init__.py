"""What is judged: the targets of an object (pod specs, workload roles, claims, Namespaces)."""
