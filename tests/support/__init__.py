"""Helpers the tests share: builders of objects and reviews, the CLI and the server as
subprocesses, fake and real clusters, paths. Import as `from tests.support.builders import pod`."""
