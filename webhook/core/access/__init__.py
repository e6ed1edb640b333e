"""What a container can reach: its GPU requests and every other way in (docs/architecture.md)."""
