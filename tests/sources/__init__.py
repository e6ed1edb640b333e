"""webhook.sources: files, YAML, JSON streams, node files, policy files and their cache."""
