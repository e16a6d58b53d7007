"""What every admission policy of the package shares: CEL literals of plain values, a policy's match on
one kind of request, its Deny binding, and the expansion of a rule over each container list.

Sources: kubernetes/website content/en/docs/reference/access-authn-authz/validating-admission-policy.md
(admissionregistration.k8s.io/v1: matchConstraints, matchConditions, variables, validations,
failurePolicy; a binding's validationActions and matchResources.namespaceSelector).
"""

import json
from typing import Any

API_VERSION = "admissionregistration.k8s.io/v1"


def cel(value: Any) -> str:
    """A CEL literal of a plain value (strings in JSON's escapes, which CEL reads the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(cel(v) for v in value) + "]"
    raise TypeError(f"no CEL literal for {type(value).__name__}")


def on_resources(
    operations: list[str], resources: list[str], *, group: str = "", version: str = "v1"
) -> dict[str, Any]:
    """A policy's failure policy and match on `group`/`version` `resources` for `operations`: fail
    closed, so an API server that cannot evaluate the policy admits nothing it matches. The default
    matchPolicy (Equivalent) also sends a request made through another version of the same resource,
    converted to `version`."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [group],
                    "apiVersions": [version],
                    "operations": operations,
                    "resources": resources,
                }
            ]
        },
    }


def binding(policy: str, namespaces: list[str] | None) -> dict[str, Any]:
    """A Deny binding of `policy` to `namespaces` (None: every namespace)."""
    match: dict[str, Any] = {}
    if namespaces is not None:
        match["namespaceSelector"] = {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}
            ]
        }
    return {"policyName": policy, "validationActions": ["Deny"], "matchResources": match}


# Kubernetes types each list by its schema (a Container is not an EphemeralContainer, a Pod's
# securityContext not a container's), so the rules run over each list on its own, never over a
# concatenation of lists of two types.
CONTAINER_LISTS = (
    "object.spec.containers",
    "(has(object.spec.initContainers) ? object.spec.initContainers : [])",
    "(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])",
)


def _call_body(expression: str, start: int) -> int:
    """The index of the parenthesis closing the one at `start - 1`."""
    depth = 1
    quote = ""
    i = start
    while depth:
        ch = expression[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        i += 1
    return i - 1


def typed_lists(expression: str) -> str:
    """`variables.containers.all(c, X)` over each container list, and `variables.contexts.all(s, X)`
    over the Pod's securityContext and each container's."""
    for name, var in (("containers", "c"), ("contexts", "s")):
        marker = f"variables.{name}.all({var}, "
        while marker in expression:
            at = expression.index(marker)
            end = _call_body(expression, at + len(marker))
            body = expression[at + len(marker) : end]
            if name == "containers":
                parts = [f"{lst}.all({var}, {body})" for lst in CONTAINER_LISTS]
            else:
                parts = [
                    f"(!has(object.spec.securityContext) || [object.spec.securityContext].all(s, {body}))",
                    *(
                        f"{lst}.all(c, !has(c.securityContext) || [c.securityContext].all(s, {body}))"
                        for lst in CONTAINER_LISTS
                    ),
                ]
            expression = expression[:at] + "(" + " && ".join(parts) + ")" + expression[end + 1 :]
    return expression
