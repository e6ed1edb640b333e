"""webhook.cli: the real CLI in a subprocess, as a user or CI runs it."""
