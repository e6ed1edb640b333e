"""webhook.core: the engine, subjects, workloads, GPU access, supply, DRA, diagnosis logic."""
