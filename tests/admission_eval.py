"""Evaluate a ValidatingAdmissionPolicy and its binding the way the API server does, with a CEL engine
from PyPI (`common-expression-language`, the `cel` module): the binding's namespace selector, the
policy's matchConditions (all true, or the policy does not apply), its variables in order, then every
validation. An expression that fails to evaluate denies, as `failurePolicy: Fail` does.

Only what the project's policies use is modelled: a `kubernetes.io/metadata.name` In/NotIn selector,
CREATE/UPDATE of Pods, Jobs and JobSets, CONNECT of pods/exec, and the requester's user name."""

import functools
from dataclasses import dataclass, field
from typing import Any

import cel


@dataclass
class Verdict:
    applies: bool
    denied: list[str] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        return not self.denied


def _selects(binding: dict[str, Any], namespace: str) -> bool:
    selector = binding.get("matchResources", {}).get("namespaceSelector")
    if selector is None:
        return True
    for expression in selector.get("matchExpressions", []):
        assert expression["key"] == "kubernetes.io/metadata.name", expression
        inside = namespace in expression["values"]
        if (expression["operator"] == "In") != inside:
            return False
    return not selector.get("matchLabels")


@functools.cache
def _program(expression: str) -> cel.Program:
    return cel.compile(expression)


def _run(expression: str, context: cel.Context) -> Any:
    """An expression's value (compiled once a session; a syntax error raises here, as at evaluation)."""
    return _program(expression).execute(context)


def evaluate(
    policy: dict[str, Any],
    binding: dict[str, Any],
    obj: dict[str, Any],
    namespace: str,
    *,
    user: str = "member@example.com",
) -> Verdict:
    """The policy's verdict on `obj` (a Pod, a Job or JobSet, or a PodExecOptions for CONNECT) in
    `namespace`, requested by `user` (request.userInfo.username). The object becomes CEL values once
    per call (one cel.Context), not once per expression."""
    if not _selects(binding, namespace):
        return Verdict(applies=False)
    request = {"namespace": namespace, "userInfo": {"username": user}}
    context = cel.Context(variables={"object": obj, "request": request, "variables": {}})
    for condition in policy.get("matchConditions", []):
        try:
            if not _run(condition["expression"], context):
                return Verdict(applies=False)
        except Exception as error:  # an error in a match condition denies (Fail)
            return Verdict(applies=True, denied=[f"matchCondition {condition['name']}: {error}"])
    variables: dict[str, Any] = {}
    for variable in policy.get("variables", []):
        context.add_variable("variables", dict(variables))
        try:
            variables[variable["name"]] = _run(variable["expression"], context)
        except Exception:  # a variable only fails where a validation reads it
            variables[variable["name"]] = _Failed(variable["name"])
    context.add_variable("variables", {k: v for k, v in variables.items() if not isinstance(v, _Failed)})
    denied = []
    for validation in policy["validations"]:
        try:
            allowed = _run(validation["expression"], context)
        except Exception as error:  # evaluation errors deny under failurePolicy Fail
            denied.append(f"{validation['message']} (error: {error})")
            continue
        if allowed is not True:
            denied.append(validation["message"])
    return Verdict(applies=True, denied=denied)


@dataclass
class _Failed:
    name: str
