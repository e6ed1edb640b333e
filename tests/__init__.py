"""The test suite: one folder per layer of the package (docs/architecture.md), helpers in
tests.support, data in data/, fixtures/, realworld/ and realworld_nodes/."""
