"""A container's environment as the kubelet builds it from the pod spec.

What a container runtime reads (NVIDIA_VISIBLE_DEVICES, AMD_VISIBLE_DEVICES, HAMi's
limits) is the environment the kubelet hands it, not the `env` list as written. The
kubelet (kubernetes pkg/kubelet/kubelet_pods.go `makeEnvironmentVariables`, commit
df5f02437d38bc34f37e48b584b83a7227db3977) builds it thus:

1. `envFrom` sources in order, each key (with the source's prefix) into one map: a later
   source overwrites an earlier one;
2. then every `env` entry in order into the same map, so `env` wins over `envFrom` and a
   later entry of a name wins over an earlier one. A non-empty `value` is expanded first
   (third_party/forked/golang/expansion/expand.go, commit
   fde22c3f9aacfd260225a9741de123a41157b7c0): `$(NAME)` becomes what the map holds for
   NAME at that moment (the entries before it and the envFrom keys), else a service link
   variable of that name, else stays as written; `$$` is one `$`. An empty value with
   `valueFrom` takes the value of its source (unknown at admission);
3. and GenerateRunContainerOptions (same file) appends the result after the variables a
   device plugin returned in its Allocate response: the pod's own value wins.

Image env is not part of it (the runtime merges the image's variables under these), so
"unset" here means "whatever the image says". A name's last entry decides; only a value
with a `$` needs the kubelet's forward pass over the entries before it (done once per
container). Nothing is cached by user text, and an expansion that grows past MAX_VALUE
characters is reported as unknowable rather than built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from webhook.core.workloads.pods import ContainerRef, PodView

State = Literal["set", "unknowable", "unset"]
MAX_VALUE = 64 << 10  # longer expansions are not built (the kubelet would; we need not)
_MEMO = "container-env"  # with the container's list and position: never user text


class EnvValue(NamedTuple):
    """What the container's pod env makes of one variable, after precedence and expansion."""

    state: State
    value: str | None = None  # the value the container gets ("set")
    entry: int | None = None  # the env entry that decides it; None: envFrom or unset
    written: str | None = None  # that entry's value as written, when expansion changed it
    why: str = ""  # why it cannot be known, in a message's words ("unknowable")
    sources: tuple[int, ...] = ()  # envFrom entries that may set it (state from envFrom)


UNSET = EnvValue("unset")


class EnvFromSource(NamedTuple):
    entry: int  # its place in envFrom
    prefix: str


class ContainerEnv:
    """One container's env, resolved as the kubelet resolves it.

    A name's value is its last entry's, worked out when asked; only a value with a `$`
    gets the kubelet's forward pass over the entries before it."""

    __slots__ = ("_env", "_resolved", "env_from")

    def __init__(self, env: Sequence[Any], env_from: Sequence[Any]) -> None:
        self.env_from = tuple(
            EnvFromSource(i, p if type(p) is str else "")
            for i, s in enumerate(env_from)
            if isinstance(s, Mapping)
            for p in (s.get("prefix"),)
        )
        self._env = env
        self._resolved: dict[str, EnvValue] | None = None  # the forward pass, once needed

    def _forward(self) -> dict[str, EnvValue]:
        """The kubelet's pass, entry by entry, each seeing those before it."""
        if self._resolved is None:
            values: dict[str, EnvValue] = {}
            for index, item in enumerate(self._env):
                name = item.get("name") if isinstance(item, Mapping) else None
                if type(name) is str:
                    values[name] = self._entry(index, item, values)
            self._resolved = values
        return self._resolved

    def get(self, name: str) -> EnvValue:
        """The variable's final value: set by env, maybe set by envFrom, or unset."""
        found = self.set_by_env(name)
        if found is not None:
            return found
        sources = self.may_set(name)
        if sources:
            return EnvValue("unknowable", why="envFrom", sources=sources)
        return UNSET

    def set_by_env(self, name: str) -> EnvValue | None:
        """What the container's `env` (not envFrom) makes of `name`, None if it has none.
        The last entry of the name decides; only a value with a `$` needs the entries
        before it (nearly every env has none: no pass over the whole list)."""
        if self._resolved is not None:
            return self._resolved.get(name)
        env = self._env
        for index in range(len(env) - 1, -1, -1):
            item = env[index]
            if isinstance(item, Mapping) and item.get("name") == name:
                value = item.get("value")
                if type(value) is str and "$" in value:
                    return self._forward().get(name)
                return self._entry(index, item, {})
        return None

    def may_set(self, name: str) -> tuple[int, ...]:
        """The envFrom entries whose keys, with their prefix, can form `name` (a key is
        never empty, so the prefix must be a strict prefix of the name)."""
        return tuple(
            s.entry
            for s in self.env_from
            if len(name) > len(s.prefix) and name.startswith(s.prefix)
        )

    def _entry(self, index: int, item: Mapping[str, Any], before: dict[str, EnvValue]) -> EnvValue:
        raw = item.get("value")
        written = raw if type(raw) is str else "" if raw is None else str(raw)
        if written:  # a non-empty value wins over valueFrom, as the kubelet reads it
            if "$" not in written:
                return EnvValue("set", written, index)
            return self._expand(index, written, before)
        if item.get("valueFrom") is not None:
            return EnvValue("unknowable", entry=index, why="valueFrom")
        return EnvValue("set", "", index)

    def _expand(self, index: int, written: str, before: dict[str, EnvValue]) -> EnvValue:
        unknown: list[str] = []
        expanded = expand(written, lambda ref: self._reference(ref, before, unknown), MAX_VALUE)
        if expanded is None:
            why = f"its expansion grows past {MAX_VALUE} characters"
            return EnvValue("unknowable", entry=index, written=written, why=why)
        if unknown:
            return EnvValue("unknowable", entry=index, written=written, why=_because(unknown))
        return EnvValue("set", expanded, index, written)

    def _reference(self, ref: str, before: dict[str, EnvValue], unknown: list[str]) -> str:
        found = before.get(ref)  # the entries before this one: the map so far
        if found is None and self.may_set(ref):
            found = EnvValue("unknowable", why="envFrom")
        if found is None:
            if _service_link(ref):
                unknown.append(f"$({ref}) may be a service link variable")
                return ""
            return f"$({ref})"  # no such variable: the kubelet leaves it as written
        if found.state == "unknowable":
            if found.entry is None or found.why == "valueFrom":
                origin = "envFrom" if found.entry is None else "valueFrom"
                unknown.append(f"$({ref}) comes from {origin}")
            else:
                unknown.append(f"$({ref}) cannot be known either")
            return ""
        return found.value or ""


def expand(text: str, lookup: Callable[[str], str], limit: int) -> str | None:
    """`text` expanded as the kubelet expands env values and subPathExprs
    (third_party/forked/golang/expansion Expand): `$(NAME)` is lookup(NAME), `$$` is one
    `$`, `$` before anything else and an unclosed `$(` stay as written. None when the
    result grows past `limit` characters (it is never built: `A=$(B)$(B)`, ...)."""
    out: list[str] = []
    size = 0
    cursor, checkpoint, end = 0, 0, len(text)
    while True:
        cursor = text.find("$", cursor)
        if cursor < 0 or cursor + 1 >= end:
            break
        out.append(text[checkpoint:cursor])
        nxt = text[cursor + 1]
        if nxt == "(":
            close = text.find(")", cursor + 2)
            if close < 0:  # an incomplete reference stays as written
                out.append("$(")
                cursor += 2
                checkpoint = cursor
                continue
            piece = lookup(text[cursor + 2 : close])
            cursor = close + 1
        else:  # `$$` is one `$`; `$x` stays `$x`
            piece = "$" if nxt == "$" else "$" + nxt
            cursor += 2
        out.append(piece)
        size += len(piece) + len(out[-2])
        checkpoint = cursor
        if size > limit:
            return None
    out.append(text[checkpoint:])
    return None if size + end - checkpoint > limit else "".join(out)


def _because(unknown: list[str]) -> str:
    return "; ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")


def _service_link(name: str) -> bool:
    """Whether a service of the namespace (or `kubernetes` in default) can define `name`:
    <SVC>_SERVICE_HOST, <SVC>_SERVICE_PORT[_<PORT>], <SVC>_PORT[_<n>_<PROTO>[_PROTO|_PORT|
    _ADDR]] (kubernetes pkg/kubelet/envvars/envvars.go FromServices)."""
    return "_SERVICE_HOST" in name or "_PORT" in name


def container_env(pod: PodView, c: ContainerRef) -> ContainerEnv:
    """The container's env as the kubelet resolves it (worked out once per pod view)."""
    key = (_MEMO, c.field, c.position)
    found: ContainerEnv | None = pod.memo.get(key)
    if found is None:
        env, env_from = c.spec.get("env"), c.spec.get("envFrom")
        found = pod.memo[key] = ContainerEnv(
            env if type(env) is list else (), env_from if type(env_from) is list else ()
        )
    return found


def pod_sets(pod: PodView, c: ContainerRef, name: str) -> EnvValue:
    """What the pod's env sets `name` to in container `c`: a known value, unknowable
    (valueFrom, envFrom, a reference to either), or unset (the image decides)."""
    return container_env(pod, c).get(name)
