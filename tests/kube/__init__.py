"""webhook.kube: the kubernetes client against a fake apiserver, and a live audit."""
