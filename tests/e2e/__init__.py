"""End to end: real control planes, the apiserver's webhook plugin, the chart and
manifests, every shell on one table, real-world corpora, packaging and CI wiring."""
