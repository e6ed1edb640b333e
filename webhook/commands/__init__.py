"""What check, audit, diff and test do, as plain functions over the engine."""
