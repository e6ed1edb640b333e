"""Tenants and a workload's GPU use, as gpu-tenancy judges them (docs/tenancy.md).

- `tenants`: who a namespace belongs to (names first, then namespace selectors);
- `use`: what a Pod is given of GPUs, in devices and in memory per device;
- `landing`: which products and sharing modes the nodes that could take it offer;
- `claims`: the DeviceClasses a Pod's DRA claims (and claim objects) ask for;
- `placement` and `limits`: the rules, each yielding Violations with their message;
- `workload`: one workload (or claim object) judged for its tenant by all of them.
"""
