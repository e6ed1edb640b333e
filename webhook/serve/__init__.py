"""The HTTPS admission webhook: wire format, server, state, TLS, metrics."""
