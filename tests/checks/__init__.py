"""webhook.checks: each check through the engine, and the shipped policy suites."""
