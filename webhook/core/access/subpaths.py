"""A mount's subPathExpr, expanded as the kubelet expands it.

The kubelet works out a container's environment (pkg/kubelet/kubelet_pods.go
makeEnvironmentVariables, kubernetes/kubernetes@001a80e9): envFrom sources first, then
each `env` entry in order, a literal `value` expanded against the variables so far (and
the service links), a `valueFrom` resolved on the node. It then expands a subPathExpr
against that environment (pkg/kubelet/container/helpers.go ExpandContainerVolumeMounts):
a variable that is missing or empty is an error, and the container does not start. Both
use `third_party/forked/golang/expansion` Expand (kubernetes/kubernetes@fde22c3f):
`$(NAME)` is the variable's value, `$$` is one `$`, anything else after a `$` is kept,
and an unclosed `$(` is kept as written.

What admission cannot see is unknowable: a `valueFrom` (a fieldRef to an annotation holds
any text, a ConfigMap key anything), and a name an envFrom source may set. A name no
entry sets is a service link, a device plugin's variable (an address, a port, a GPU id)
or missing (no mount at all): none of these names a directory, so it is kept as
`$(NAME)`, which matches no device path either.

Linear in the env and the expression: an expanded value longer than PATH_MAX cannot be
mounted, so values are cut there and never grow without bound (`A=$(B)$(B)`, ...).
"""

from __future__ import annotations

from typing import NamedTuple

from webhook.core.access.container_env import ContainerEnv, expand

# Linux PATH_MAX: a longer sub path fails to mount, whatever it names.
PATH_MAX = 4096


class Unknowable(NamedTuple):
    """A subPathExpr whose value admission cannot know, and the variables that make it so."""

    names: tuple[str, ...]


def expand_sub_path(expr: str, env: ContainerEnv) -> str | Unknowable | None:
    """A subPathExpr as the kubelet expands it, against the container's env as the kubelet
    resolves it (webhook.core.access.container_env): the sub path, Unknowable, or None
    when the kubelet refuses it (a variable it finds empty or missing, a path too long)."""
    empty: list[str] = []
    unknown: list[str] = []

    def lookup(name: str) -> str:
        found = env.get(name)
        if found.state == "unknowable":
            unknown.append(name)
            return ""
        if found.state == "unset":
            return f"$({name})"  # no such variable: kept, and it names no device path
        if not found.value:  # ExpandContainerVolumeMounts: empty is an error, like missing
            empty.append(name)
        return found.value or ""

    expanded = expand(expr, lookup, PATH_MAX)
    if unknown:
        return Unknowable(tuple(dict.fromkeys(unknown)))
    if empty or expanded is None:
        return None
    return expanded
