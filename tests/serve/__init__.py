"""webhook.serve: the admission server in process and as a real process over TLS."""
