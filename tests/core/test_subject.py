"""core.subject: the namespace an object is judged in, the same in every shell."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.engine.subject import Subject, subject_of


@pytest.mark.parametrize(
    ("obj", "namespace", "judged_in"),
    [
        ({"metadata": {"namespace": "team-a"}}, None, "team-a"),
        # kubectl apply -f puts an object without a namespace in `default`.
        ({"metadata": {"name": "p"}}, None, "default"),
        ({"metadata": {"namespace": ""}}, None, "default"),
        ({"metadata": {"namespace": 7}}, None, "default"),  # not a namespace at all
        ({"metadata": "p"}, None, "default"),
        ({}, None, "default"),
        # The request's namespace (the apiserver's URL) wins over the object's.
        ({"metadata": {"namespace": "team-a"}}, "team-b", "team-b"),
        ({"metadata": {}}, "team-b", "team-b"),
        # A request without one (a cluster-scoped object) falls back like a file.
        ({"metadata": {"namespace": "team-a"}}, "", "team-a"),
        ({"metadata": {}}, "", "default"),
        # A Namespace is judged in itself, with a request (UPDATE: its name; CREATE:
        # none) or without (a file), so excludedNamespaces skips it alike everywhere.
        ({"kind": "Namespace", "metadata": {"name": "kube-system"}}, None, "kube-system"),
        ({"kind": "Namespace", "metadata": {"name": "kube-system"}}, "", "kube-system"),
        ({"kind": "Namespace", "metadata": {"name": "team-a"}}, "team-a", "team-a"),
        ({"kind": "Namespace", "metadata": {"generateName": "t-"}}, None, "default"),
    ],
)
def test_the_namespace_it_is_judged_in(
    obj: dict[str, Any], namespace: str | None, judged_in: str
) -> None:
    assert subject_of(obj, namespace=namespace) == Subject(obj, judged_in, "CREATE")


def test_the_operation_is_carried() -> None:
    pod = {"kind": "Pod", "metadata": {"namespace": "ml"}}

    subject = subject_of(pod, namespace="ml", operation="UPDATE")

    assert (subject.kind, subject.namespace, subject.operation) == ("Pod", "ml", "UPDATE")
