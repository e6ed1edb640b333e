"""Loading policy files: a directory of YAML documents into a PolicySet, errors by file and line.

pydantic (webhook.sources.policy_schema) is imported only when documents are validated:
listing and hashing the files, as the policy cache does first, goes without it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any, Literal

from webhook.checks import registry
from webhook.core.engine.check import Check, CheckParams, ParamError
from webhook.core.engine.policy import Action, Policy, PolicySet
from webhook.core.supply.profiles import (
    GENERIC,
    ClusterProfile,
    ContainerToolkit,
    GpuNodes,
    ProfileName,
    TaintFact,
    profile,
)
from webhook.core.workloads.shapes import (
    ContainerShape,
    Factor,
    GangField,
    GpuCount,
    JobShape,
    KindShape,
    PodField,
    PodLabels,
    PodShape,
)
from webhook.errors import ManifestError, PolicyError
from webhook.sources.yamlsource import Document, iter_documents

if TYPE_CHECKING:  # pydantic comes with these: imported where documents are validated
    from pydantic import TypeAdapter, ValidationError

    from webhook.sources.policy_schema import (
        ClusterProfileDocument,
        ContainersPath,
        CustomKind,
        GpuCountSpec,
        GpuNodesSpec,
        JobSpec,
        PodLabelSpec,
        PodSpecPath,
        ReplicaField,
        TemplatePath,
    )

TESTS_DIR = "tests"  # `gpu-admission test` suites and their Node lists: not policies


def load_policy_dir(
    directory: str | FsPath, *, cluster_profile: ProfileName | None = None
) -> PolicySet:
    """Every policy file below `directory`; all errors at once, in one PolicyError.
    `cluster_profile` (the --cluster-profile flag) takes the place of the ClusterProfile
    document's spec.profile; the document's other settings still apply."""
    root = FsPath(directory)
    if not root.is_dir():
        raise PolicyError(f"{root}: policy directory not found")
    return load_policy_files(policy_files(root), root=root, cluster_profile=cluster_profile)


def policy_files(root: FsPath) -> list[FsPath]:
    """*.yaml/*.yml/*.json below `root`, sorted; a `tests/` directory holds test suites,
    not policies, and ConfigMap mounts hold each file twice (the ..data internals)."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.suffix in (".yaml", ".yml", ".json")
        and p.is_file()
        and not any(part.startswith("..") for part in p.relative_to(root).parts)
        and TESTS_DIR not in p.relative_to(root).parts[:-1]
    )


def files_digest(files: Sequence[tuple[str, bytes]]) -> str:
    """sha256 over (name, content) pairs: which policy set this is, and whether it changed."""
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + data)
    return digest.hexdigest()


def read_files(files: Sequence[FsPath], root: FsPath | None) -> list[tuple[str, bytes]]:
    """(name relative to root, content) of each file; OSError for one that cannot be read."""
    return [(str(p.relative_to(root) if root else p), p.read_bytes()) for p in files]


def load_policy_files(
    files: Sequence[FsPath],
    *,
    root: FsPath | None = None,
    cluster_profile: ProfileName | None = None,
) -> PolicySet:
    policies: list[Policy] = []
    kinds: list[KindShape] = []
    settings: list[Action | Literal["ignore"]] = []
    profiles: list[tuple[str, ClusterProfileDocument]] = []
    errors: list[str] = []
    checks = registry()
    contents: list[tuple[str, bytes]] = []
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            errors.append(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        contents.append((str(path.relative_to(root) if root else path), data))
        try:
            documents = 0
            for doc in iter_documents(data, source=str(path)):
                documents += 1
                _load_document(
                    doc, str(path), checks, policies, (kinds, settings, profiles), errors
                )
        except ManifestError as exc:
            errors.append(str(exc))
            continue
        if documents == 0:
            errors.append(empty_file_error(path))
    errors += _duplicates(policies)
    if len(profiles) > 1:
        where = ", ".join(w for w, _ in profiles)
        errors.append(f"more than one ClusterProfile document: {where}; keep one")
    if errors:
        raise PolicyError("\n".join(errors))
    if not policies:
        raise PolicyError(f"{root or 'policy files'}: no GPUPolicy documents found")
    return PolicySet(
        tuple(policies),
        tuple(kinds),
        files_digest(contents)[:16],
        _strictest(settings),
        _profile(profiles[0] if profiles else None, cluster_profile),
    )


def _profile(
    found: tuple[str, ClusterProfileDocument] | None, flag: ProfileName | None
) -> ClusterProfile:
    """The policy set's ClusterProfile: the document's, with the flag's profile name."""
    if found is None:
        return GENERIC if flag is None else profile(flag, source="--cluster-profile")
    where, doc = found
    spec = doc.spec
    return profile(
        spec.profile if flag is None else flag,
        extended_resource_toleration=spec.extendedResourceToleration,
        sharing=None if spec.sharing is None else tuple(spec.sharing),
        source=where if flag is None else f"{where} and --cluster-profile",
        gpu_nodes=None if spec.gpuNodes is None else _gpu_nodes(spec.gpuNodes),
        container_toolkit=None
        if spec.containerToolkit is None
        else ContainerToolkit(
            spec.containerToolkit.acceptEnvvarUnprivileged,
            spec.containerToolkit.deviceListStrategy,
        ),
        seccomp_default=None if spec.kubelet is None else spec.kubelet.seccompDefault,
    )


def _gpu_nodes(spec: GpuNodesSpec) -> GpuNodes:
    labels = []
    for label in spec.labels:
        key, eq, value = label.partition("=")
        labels.append((key, value if eq else None))
    return GpuNodes(tuple(TaintFact(t.key, t.value, t.effect) for t in spec.taints), tuple(labels))


def _strictest(settings: list[Action | Literal["ignore"]]) -> Action | Literal["ignore"]:
    """Several WorkloadKinds documents may set unconfiguredGpuKinds: the strictest wins."""
    order: tuple[Action | Literal["ignore"], ...] = ("deny", "warn", "dryrun", "ignore")
    return min(settings, key=order.index) if settings else "warn"


def kind_shape(c: CustomKind, *, source: str, action: Action) -> KindShape:
    """A WorkloadKinds entry as the core reads it: dotted paths split into steps."""
    pods = [
        PodShape("template", _steps(t.path), **_role(t), fallback=_opt_steps(t.fallback))
        for t in c.templates
    ]
    for p in c.podSpecs:
        containers = tuple(
            ContainerShape(_steps(x))
            if isinstance(x, str)
            else ContainerShape(
                _steps(x.path), _steps(x.resources), _opt_steps(x.gpu), _gpu_count(x.gpuCount)
            )
            for x in p.containers
        )
        labels = tuple(_steps(at) for at in p.labelsAt)
        fields = _pod_fields(p)
        pods.append(PodShape("pod", _steps(p.path), containers, labels, **_role(p), fields=fields))
    for k in c.containers:
        own = ContainerShape((), _steps(k.resources), _opt_steps(k.gpu), _gpu_count(k.gpuCount))
        labels = tuple(_steps(at) for at in k.labelsAt)
        fields = _pod_fields(k)
        pods.append(
            PodShape("containers", _steps(k.path), (own,), labels, **_role(k), fields=fields)
        )
    return KindShape(c.group, c.kind, tuple(pods), source, action, _job(c.job))


def _job(job: JobSpec | None) -> JobShape | None:
    if job is None:
        return None
    gang = tuple(
        GangField(_steps(g.path), _opt_steps(g.minAvailable), g.unset, g.zeroIsUnset)
        for g in job.gang
    )
    return JobShape(
        gang,
        _factors(job.group),
        _opt_steps(job.nprocPerNode),
        tuple(job.nprocRoles),
        job.ranksAlike,
        _pod_labels(job.podLabels),
    )


def _gpu_count(spec: GpuCountSpec | None) -> GpuCount | None:
    if spec is None:
        return None
    return GpuCount(spec.form, spec.key, spec.nameKey, spec.default, spec.customKey)


def _pod_labels(labels: PodLabelSpec | None) -> PodLabels | None:
    if labels is None:
        return None
    return PodLabels(tuple(labels.job), labels.role, tuple(labels.index))


def _factors(fields: list[ReplicaField] | None) -> tuple[Factor, ...] | None:
    if fields is None:
        return None
    return tuple(Factor(_opt_steps(f.path), f.default, f.less) for f in fields)


def _pod_fields(p: PodSpecPath | ContainersPath) -> tuple[PodField, ...]:
    return tuple(
        PodField(
            _steps(f.source),
            f.to,
            f.joining,
            f.onlyMounted,
            f.keyPrefix,
            f.keySuffix,
            f.name,
            f.mountPath,
        )
        for f in p.podFields
    )


def _role(p: TemplatePath | PodSpecPath | ContainersPath) -> dict[str, Any]:
    """What a place says of its role: optional, its name, its Pod count's factors."""
    return {
        "optional": p.optional,
        "role": p.role,
        "role_at": _opt_steps(p.roleAt),
        "replicas": _factors(p.replicas),
        "minimum": _opt_steps(p.minAvailable),
    }


def _steps(dotted: str) -> tuple[str, ...]:
    """`spec.a.*.b` -> ("spec", "a", "*", "b"); "." is the match itself; "$." the root."""
    if dotted == ".":
        return ()
    if dotted.startswith("$."):
        return ("$", *dotted[2:].split("."))
    return tuple(dotted.split("."))


def _opt_steps(dotted: str | None) -> tuple[str, ...] | None:
    return None if dotted is None else _steps(dotted)


def empty_file_error(path: FsPath) -> str:
    # A file caught between truncation and write (or a ConfigMap key emptied by a bad
    # template) would otherwise load as a set without the policies it held.
    return (
        f"{path}: holds no GPUPolicy or WorkloadKinds document (empty, or only whitespace, "
        "comments and ---): a half-written file? To drop its policies, delete the file"
    )


def _duplicates(policies: list[Policy]) -> list[str]:
    sources: dict[str, list[str]] = {}
    for policy in policies:
        sources.setdefault(policy.name, []).append(policy.source)
    return [
        f"policy name {name!r} is defined more than once: in {', '.join(where)}"
        for name, where in sorted(sources.items())
        if len(where) > 1
    ]


def _load_document(
    doc: Document,
    source: str,
    checks: Mapping[str, Check],
    policies: list[Policy],
    shapes: tuple[
        list[KindShape],
        list[Action | Literal["ignore"]],
        list[tuple[str, ClusterProfileDocument]],
    ],
    errors: list[str],
) -> None:
    data = doc.data
    kind = data.get("kind") if isinstance(data, Mapping) else None
    where = f"{source}: document {doc.index} (line {doc.line})"
    from pydantic import ValidationError

    from webhook.sources import policy_schema as schema

    model: (
        type[schema.PolicyDocument]
        | type[schema.WorkloadKindsDocument]
        | type[schema.ClusterProfileDocument]
    )
    if kind == "GPUPolicy":
        model = schema.PolicyDocument
    elif kind == "WorkloadKinds":
        model = schema.WorkloadKindsDocument
    elif kind == "ClusterProfile":
        model = schema.ClusterProfileDocument
    else:
        errors.append(
            f"{where}: kind must be GPUPolicy, WorkloadKinds or ClusterProfile, got {kind!r}"
        )
        return
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        errors.extend(_explain(exc, where, doc))
        return
    if isinstance(parsed, schema.ClusterProfileDocument):
        shapes[2].append((f"{source}: document {doc.index}", parsed))
        return
    if isinstance(parsed, schema.WorkloadKindsDocument):
        kinds_spec, name = parsed.spec, parsed.metadata.name
        action = kinds_spec.unmatchedPathAction
        shapes[0].extend(
            kind_shape(c, source=name, action=action) for c in kinds_spec.customResources
        )
        if kinds_spec.unconfiguredGpuKinds is not None:
            shapes[1].append(kinds_spec.unconfiguredGpuKinds)
        return
    where = f'{source}: document {doc.index} (GPUPolicy "{parsed.metadata.name}")'
    check = checks.get(parsed.spec.check)
    if check is None:
        line = doc.line_of(("spec", "check"))
        errors.append(
            f"{where}, line {line}, field spec.check: unknown check "
            f"{parsed.spec.check!r}; built-in checks: {', '.join(sorted(checks))}"
        )
        return
    try:
        params = _params_adapter(check.params).validate_python(parsed.spec.parameters)
    except ValidationError as exc:
        errors.extend(_explain(exc, where, doc, prefix=("spec", "parameters")))
        return
    spec = parsed.spec
    policies.append(
        Policy(
            parsed.metadata.name,
            spec.enforcementAction,
            spec.match,
            check,
            params,
            spec.messagePrefix,
            spec.description,
            source,
        )
    )


_ADAPTERS: dict[type[CheckParams], TypeAdapter[Any]] = {}


def _params_adapter(params: type[CheckParams]) -> TypeAdapter[Any]:
    """pydantic's validator of a check's Params dataclass, built once per class."""
    adapter = _ADAPTERS.get(params)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _ADAPTERS[params] = TypeAdapter(params)
    return adapter


# Unknown keys: in a pydantic model, and in a dataclass (a Match, a check's Params).
_UNKNOWN = frozenset({"extra_forbidden", "unexpected_keyword_argument"})


def _explain(
    exc: ValidationError, where: str, doc: Document, prefix: tuple[str, ...] = ()
) -> list[str]:
    out = []
    for err in exc.errors():
        loc = (*prefix, *err["loc"])
        got = err.get("input")
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, ParamError):  # a check's own rule on one of its parameters
            loc = (*loc, cause.field)
            got = got.get(cause.field) if isinstance(got, Mapping) else got
        field = ".".join(str(p) for p in loc) or "(document)"
        line = doc.line_of(tuple(p for p in loc if isinstance(p, str | int)))
        shown = "" if err["type"] == "missing" else f" (got {got!r:.60})"
        msg = err["msg"]
        if err["type"] in _UNKNOWN:
            msg = "unknown field"
        out.append(f"{where}, line {line}, field {field}: {msg}{shown}")
    return out
