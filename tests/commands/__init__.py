"""webhook.commands as functions: audit, the dump commands, the parallel check."""
