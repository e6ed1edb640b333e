"""Dynamic Resource Allocation: the supply, CEL selectors, the devices a request can get
(docs/dra.md)."""
