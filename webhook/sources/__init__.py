"""Reading input: YAML/JSON files with line marks, dumps, policy files."""
