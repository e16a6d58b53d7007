"""The CEL validation rules (`x-kubernetes-validations`) of every vendored CRD schema, evaluated by
tests/crd_cel.py over every object `validate` checks: each stack's rendered objects (the golden plans,
which tests/test_golden.py holds equal to the renders), the configurations of test_kubernetes_objects.py
and every other test that validates. A rule the engine cannot evaluate is listed, never passed."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from typing import Any

import cel
import pytest

from tests import crd_cel
from tests.kubernetes_schemas import CRD_SCHEMAS, cel_outcome, cel_rules, validate
from tests.test_vendored_crds import VALID, _set
from tools.golden import GOLDEN_DIR
from tools.offline import stacks
from tools.plan import kubernetes_objects

# Rules no object is checked against at create, by schema file and node: transition rules (they read
# oldSelf; the API server runs them on update only). A re-vendored CRD that changes them fails here.
TRANSITION_RULES = {
    ("crds-catalog/cloud.google.com/computeclass_v1.json", ".spec"),
    ("crds-catalog/cloud.google.com/computeclass_v1.json", ".spec.autopilot"),
    ("crds-catalog/cloud.google.com/computeclass_v1.json", ".spec.autopilot.enabled"),
    ("crds/kueue.x-k8s.io/kueue.x-k8s.io_resourceflavors.yaml", ".spec"),
    ("crds/kueue.x-k8s.io/kueue.x-k8s.io_localqueues.yaml", ".spec.clusterQueue"),
    ("crds/kueue.x-k8s.io/kueue.x-k8s.io_topologies.yaml", ".spec.levels"),
    ("crds/kueue.x-k8s.io/kueue.x-k8s.io_admissionchecks.yaml", ".spec.controllerName"),
    ("crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml", ".spec.failurePolicy"),
    ("crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml", ".spec.network"),
    ("crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml", ".spec.replicatedJobs[].dependsOn"),
    ("crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml", ".spec.startupPolicy"),
    ("crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml", ".spec.successPolicy"),
    ("crds/jobset.x-k8s.io/jobset.x-k8s.io_jobsets.yaml", ".spec.volumeClaimPolicies"),
}
# Rules the engine cannot evaluate (a Kubernetes CEL library function it lacks, syntax it cannot parse),
# as (schema file, node, reason). A newly vendored CRD with one fails
# here and names it; add it with its reason, and the objects of that kind go unchecked by that rule.
PODMONITORING_CRD = "crds/monitoring.googleapis.com/monitoring.googleapis.com_podmonitorings.yaml"
UNEVALUABLE_RULES: set[tuple[str, str, str]] = {
    # Managed Prometheus' PodMonitoring (prometheus-engine@2ffde4ec): the scrape timeout against the
    # interval (duration strings) and a proxy URL's isURL; the objects declared set no timeout or proxy.
    (PODMONITORING_CRD, "", "unevaluable: reads strings of format duration"),
    (PODMONITORING_CRD, ".spec.endpoints[]", "unevaluable: reads strings of format duration"),
    (PODMONITORING_CRD, ".spec.endpoints[].oauth2.proxyUrl", "unevaluable: the engine lacks isURL"),
    (PODMONITORING_CRD, ".spec.endpoints[].proxyUrl", "unevaluable: the engine lacks isURL"),
}


def _all_rules() -> list[crd_cel.Rule]:
    found = []
    for key, filenames in CRD_SCHEMAS.items():
        for filename in filenames:
            node = cel_rules(filename, *key)  # type: ignore[arg-type]
            found += crd_cel.rules(node) if node is not None else []
    return found


def test_unevaluable_rules_are_exactly_the_known_ones() -> None:
    unevaluable = {(r.source, r.path, r.skip) for r in _all_rules() if r.skip and r.skip != "transition"}
    assert unevaluable == UNEVALUABLE_RULES, (
        "rules the CEL engine cannot evaluate changed; each is reported, never passed: "
        f"new {sorted(unevaluable - UNEVALUABLE_RULES)}, gone {sorted(UNEVALUABLE_RULES - unevaluable)}"
    )


def test_transition_rules_are_exactly_the_known_ones() -> None:
    """Exact for the files listed; a newly vendored file's transition rules are skipped the same way
    and counted in the report of test_every_rule_of_every_rendered_object_holds."""
    listed = {source for source, _ in TRANSITION_RULES}
    transition = {(r.source, r.path) for r in _all_rules() if r.skip == "transition" and r.source in listed}
    assert transition == TRANSITION_RULES


def test_every_rule_of_every_rendered_object_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """Over every stack's objects of a vendored kind: each rule holds, and the counts are reported."""
    objects: Counter[str] = Counter()
    evaluated: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    failures = []
    for stack in stacks():
        document = json.loads((GOLDEN_DIR / f"{stack}.json").read_text(encoding="utf-8"))
        for obj in kubernetes_objects(document):
            if (obj.get("apiVersion"), obj.get("kind")) not in CRD_SCHEMAS:
                continue
            objects[obj["kind"]] += 1
            for outcome in cel_outcome(obj):
                evaluated[obj["kind"]] += outcome.evaluated
                skipped[obj["kind"]] += len(outcome.skipped)
                failures += [
                    f"{stack}: {obj['kind']} {obj['metadata'].get('name')}: {f}" for f in outcome.failures
                ]
    with capsys.disabled():
        print(
            f"\nCRD CEL rules, {len(stacks())} stacks: {sum(objects.values())} objects of vendored kinds, "
            f"{sum(evaluated.values())} rule evaluations, {sum(skipped.values())} skipped "
            f"(transition or unevaluable); by kind: {dict(sorted(evaluated.items()))}"
        )
    assert not failures, failures
    assert sum(evaluated.values()) > 0, "no rule was evaluated: the rendered objects went unchecked"


# One object per CRD family breaking a rule of its CRD, passing its openAPIV3Schema: the evaluator must
# refuse it with the rule's message, read from the vendored CRD (kind, rule node, the rule's start). Each
# starts from a valid object (test_vendored_crds.VALID).
GATEWAY_TLS = {"mode": "Terminate", "certificateRefs": [{"name": "cert"}]}
BROKEN = [
    (
        "PodMonitoring",
        _set("spec.endpoints.0.authorization.type", "Basic"),
        ".spec.endpoints[].authorization.type",
        "self != 'Basic'",
    ),
    (
        "ClusterQueue",
        _set("spec.resourceGroups.0.coveredResources", ["nvidia.com/gpu", "cpu"]),
        ".spec.resourceGroups[]",
        "self.flavors.all",
    ),
    (
        "ClusterQueue",
        _set("spec.resourceGroups.0.flavors.0.resources.0.borrowingLimit", 4),
        ".spec",
        "!has(self.cohortName)",
    ),
    (
        "ResourceFlavor",
        _set("spec.tolerations.0.tolerationSeconds", 30),
        ".spec.tolerations",
        "self.all(x, has(x.tolerationSeconds)",
    ),
    (
        "Topology",
        _set(
            "spec.levels",
            [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "cloud.google.com/gce-topology-block"}],
        ),
        ".spec.levels",
        "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname'))",
    ),
    (
        "JobSet",
        lambda obj: obj["spec"].update(
            startupPolicy={"startupPolicyOrder": "InOrder"},
            replicatedJobs=[
                *obj["spec"]["replicatedJobs"],
                {
                    **obj["spec"]["replicatedJobs"][0],
                    "name": "second",
                    "dependsOn": [{"name": "workers", "status": "Ready"}],
                },
            ],
        ),
        ".spec",
        "!(has(self.startupPolicy)",
    ),
    (
        "InferencePool",
        _set("spec.targetPorts", [{"number": 8000}, {"number": 8000}]),
        ".spec.targetPorts",
        "self.all(p1",
    ),
    (
        "Gateway",
        _set("spec.listeners", [{"name": "http", "port": 80, "protocol": "HTTP", "tls": GATEWAY_TLS}]),
        ".spec.listeners",
        "self.all(l, l.protocol in ['HTTP', 'TCP', 'UDP'] ? !has(l.tls)",
    ),
    (
        "Gateway",
        _set("spec.listeners", [{"name": "a", "port": 80, "protocol": "HTTP"}] * 2),
        ".spec.listeners",
        "self.all(l1, self.exists_one(l2, l1.name == l2.name))",
    ),
    (
        "HTTPRoute",
        _set("spec.rules.0.matches", [{"path": {"type": "PathPrefix", "value": "v1/chat"}}]),
        ".spec.rules[].matches[].path",
        "(self.type in ['Exact','PathPrefix']) ? self.value.startsWith('/')",
    ),
    (
        # The backendRef's group defaults to "" and its kind to Service: a Service needs a port.
        "HTTPRoute",
        _set("spec.rules.0.backendRefs", [{"name": "chat"}]),
        ".spec.rules[].backendRefs[]",
        "(size(self.group) == 0 && self.kind == 'Service')",
    ),
    (
        # Two refs to one parent, one with a sectionName: reads `namespace` as CEL's `__namespace__`, and
        # the refs' defaulted group and kind.
        "HTTPRoute",
        _set(
            "spec.parentRefs",
            [{"name": "chat", "namespace": "a", "sectionName": "http"}, {"name": "chat", "namespace": "a"}],
        ),
        ".spec.parentRefs",
        "self.all(p1, self.all(p2,",
    ),
]
COMPUTE_CLASS = {
    "apiVersion": "cloud.google.com/v1",
    "kind": "ComputeClass",
    "metadata": {"name": "gpu"},
    "spec": {
        "priorities": [{"machineFamily": "a3", "machineType": "a3-highgpu-8g"}],
        "whenUnsatisfiable": "DoNotScaleUp",
    },
}


def _rule_message(kind: str, path: str, rule_start: str) -> str:
    """The message of a rule, read from the vendored CRD (so a test names no message it made up)."""
    key = next(k for k in CRD_SCHEMAS if k[1] == kind)
    node = cel_rules(CRD_SCHEMAS[key][0], *key)  # type: ignore[arg-type]
    assert node is not None
    (rule,) = [r for r in crd_cel.rules(node) if r.path == path and r.rule.startswith(rule_start)]
    return rule.message


@pytest.mark.parametrize(
    ("kind", "change", "path", "rule_start"),
    BROKEN,
    ids=[f"{k}-{p}-{i}" for i, (k, _, p, _) in enumerate(BROKEN)],
)
def test_an_object_breaking_a_rule_of_its_crd_is_refused(
    kind: str, change: Any, path: str, rule_start: str
) -> None:
    obj = copy.deepcopy(VALID[kind])
    validate(copy.deepcopy(obj))
    change(obj)
    message = _rule_message(kind, path, rule_start)
    with pytest.raises(
        AssertionError, match=f"breaks its CRD's CEL validation rules: .*{re.escape(message)}"
    ):
        validate(obj)


def test_a_compute_class_breaking_a_rule_of_gkes_crd_is_refused() -> None:
    with pytest.raises(AssertionError, match="MachineFamily and MachineType cannot be set together"):
        validate(copy.deepcopy(COMPUTE_CLASS))
    fixed = copy.deepcopy(COMPUTE_CLASS)
    del fixed["spec"]["priorities"][0]["machineFamily"]
    validate(fixed)


def test_parent_refs_in_two_namespaces_need_no_section_names() -> None:
    """The counterpart of the `__namespace__` case: were `namespace` not escaped, both refs would read
    as the same parent and the route would be refused."""
    obj = copy.deepcopy(VALID["HTTPRoute"])
    obj["spec"]["parentRefs"] = [
        {"name": "chat", "namespace": "a", "sectionName": "http"},
        {"name": "chat", "namespace": "b"},
    ]
    validate(obj)


def _rules_of(filename: str, api_version: str, kind: str) -> list[crd_cel.Rule]:
    node = cel_rules(filename, api_version, kind)
    return crd_cel.rules(node) if node is not None else []


def test_every_crd_family_with_rules_has_a_refused_object() -> None:
    """A newly vendored CRD group with a rule evaluated at create needs its own case in BROKEN, so the
    evaluator is shown to refuse something of it rather than pass everything (a group whose only rules
    are transition rules, as NVIDIA's ComputeDomain, has nothing to break at create)."""
    with_rules = {
        api_version.split("/")[0]
        for (api_version, kind), filenames in CRD_SCHEMAS.items()
        for filename in filenames
        if any(r.skip is None for r in _rules_of(filename, api_version, kind))
    }
    covered = {VALID[kind]["apiVersion"].split("/")[0] for kind, *_ in BROKEN} | {"cloud.google.com"}
    assert with_rules <= covered, f"no refused object for {sorted(with_rules - covered)}"


# ---- the evaluator itself, on small schemas


def _node(schema: dict[str, Any]) -> crd_cel._Node:
    return crd_cel.compile_schema({"type": "object", "properties": {"spec": schema}}, "test")


def _outcome(schema: dict[str, Any], spec: Any) -> crd_cel.Outcome:
    return crd_cel.evaluate(
        {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x"}, "spec": spec}, _node(schema)
    )


def _rules(*rules: str) -> list[dict[str, str]]:
    return [{"rule": rule} for rule in rules]


def test_a_rule_runs_for_each_list_element_and_each_map_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "list": {
                "type": "array",
                "items": {"type": "integer", "x-kubernetes-validations": _rules("self < 10")},
            },
            "map": {
                "type": "object",
                "additionalProperties": {
                    "type": "string",
                    "x-kubernetes-validations": _rules("self != 'bad'"),
                },
            },
        },
    }
    outcome = _outcome(schema, {"list": [1, 20, 30], "map": {"a": "ok", "b": "bad"}})
    assert outcome.evaluated == 5
    assert outcome.failures == [
        ".spec.list[1]: failed rule: self < 10",
        ".spec.list[2]: failed rule: self < 10",
        ".spec.map['b']: failed rule: self != 'bad'",
    ]


def test_a_rule_on_an_absent_field_does_not_run() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "x-kubernetes-validations": _rules("false")}},
    }
    assert _outcome(schema, {}).evaluated == 0
    assert _outcome(schema, {"a": "x"}).failures == [".spec.a: failed rule: false"]


def test_defaults_apply_before_the_rules_and_are_themselves_defaulted() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-validations": _rules("self.mode == 'Fast' && self.inner.level == 3"),
        "properties": {
            "mode": {"type": "string", "default": "Fast"},
            "inner": {
                "type": "object",
                "default": {},
                "properties": {"level": {"type": "integer", "default": 3}},
            },
        },
    }
    assert _outcome(schema, {}).failures == []
    assert _outcome(schema, {"mode": "Slow"}).failures == [
        ".spec: failed rule: self.mode == 'Fast' && self.inner.level == 3"
    ]


def test_property_names_are_escaped_as_kubernetes_does() -> None:
    """pkg/cel/escaping.go (kubernetes/apiserver v0.34.10): reserved words as __word__, `__` as
    __underscores__, `.` `-` `/` as __dot__ __dash__ __slash__; a name with another character or
    starting with a digit cannot be read."""
    assert crd_cel.escape("namespace") == "__namespace__"
    assert crd_cel.escape("in") == "__in__"
    assert crd_cel.escape("a.b-c/d") == "a__dot__b__dash__c__slash__d"
    assert crd_cel.escape("x__y") == "x__underscores__y"
    assert crd_cel.escape("snake_case") == "snake_case"
    assert crd_cel.escape("1st") is None
    assert crd_cel.escape("a b") is None
    schema = {
        "type": "object",
        "x-kubernetes-validations": _rules(
            "self.__namespace__ == 'a' && self.x__dash__y == 1 && !has(self.z)"
        ),
        "properties": {"namespace": {"type": "string"}, "x-y": {"type": "integer"}, "z": {"type": "object"}},
    }
    assert _outcome(schema, {"namespace": "a", "x-y": 1}).failures == []


def test_only_declared_properties_are_visible_and_the_root_shows_name_only() -> None:
    node = crd_cel.compile_schema(
        {
            "type": "object",
            "x-kubernetes-validations": _rules(
                "self.metadata == {'name': 'x'} && self.kind == 'X' && !has(self.extra)"
            ),
            "properties": {"metadata": {"type": "object"}},
        },
        "test",
    )
    obj = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x", "labels": {"a": "b"}}, "extra": 1}
    assert crd_cel.evaluate(obj, node).failures == []


def test_numbers_are_doubles_and_date_times_are_timestamps() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-validations": _rules(
            "type(self.n) == double", "self.t < timestamp('2030-01-01T00:00:00Z')"
        ),
        "properties": {"n": {"type": "number"}, "t": {"type": "string", "format": "date-time"}},
    }
    assert _outcome(schema, {"n": 1, "t": "2026-11-28T00:00:00Z"}).failures == []


def test_an_evaluation_error_refuses_the_object() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-validations": _rules("self.missing == 1"),
        "properties": {"missing": {"type": "integer"}},
    }
    (failure,) = _outcome(schema, {}).failures
    assert failure.startswith(".spec: ") and "evaluating rule: self.missing == 1" in failure


@pytest.mark.parametrize(
    "rule",
    [
        "self.size.isGreaterThan(quantity('1Gi'))",  # Kubernetes' quantity library
        "self.items.isSorted()",  # Kubernetes' lists library
        "cel.bind(x, self.size, x != '')",  # cel-go's bindings
        "self.items.all(i, v, v > 0)",  # two-variable comprehensions (Kubernetes 1.32+)
        "url(self.size).getHost() != ''",
    ],
)
def test_a_rule_the_engine_cannot_evaluate_is_reported_not_passed(rule: str) -> None:
    schema = {
        "type": "object",
        "x-kubernetes-validations": _rules(rule),
        "properties": {"size": {"type": "string"}, "items": {"type": "array", "items": {"type": "integer"}}},
    }
    outcome = _outcome(schema, {"size": "2Gi", "items": [1, 2]})
    assert outcome.evaluated == 0 and outcome.failures == []
    (skipped,) = outcome.skipped
    assert skipped.skip is not None and skipped.skip.startswith("unevaluable: the engine lacks")


def test_a_transition_rule_is_skipped_at_create_and_reported() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-validations": _rules("self == oldSelf"),
        "properties": {"a": {"type": "string"}},
    }
    outcome = _outcome(schema, {"a": "x"})
    assert outcome.evaluated == 0 and [r.skip for r in outcome.skipped] == ["transition"]
    optional = {**schema, "x-kubernetes-validations": [{"rule": "self == oldSelf", "optionalOldSelf": True}]}
    assert (
        _outcome(optional, {"a": "x"}).skipped[0].skip
        == "unevaluable: optionalOldSelf (oldSelf as an optional at create)"
    )


# cel-go v0.26.0 (the version Kubernetes 1.34 builds with), ext/strings.go: the documented examples of
# each strings-extension function the evaluator hands the engine from its own optional library.
STRINGS_EXAMPLES = [
    ("'hello'.charAt(4)", "o"),
    ("'hello'.charAt(5)", ""),
    ("['hello', 'mellow'].join()", "hellomellow"),
    ("['hello', 'mellow'].join(' ')", "hello mellow"),
    ("[].join('/')", ""),
    ("'TacoCat'.lowerAscii()", "tacocat"),
    ("'TacoCat'.upperAscii()", "TACOCAT"),
    ("'hello hello'.replace('he', 'we')", "wello wello"),
    ("'hello hello'.replace('he', 'we', 1)", "wello hello"),
    ("'hello hello'.replace('he', 'we', 0)", "hello hello"),
    ("'hello hello hello'.split(' ')", ["hello", "hello", "hello"]),
    ("'hello hello hello'.split(' ', 0)", []),
    ("'hello hello hello'.split(' ', 1)", ["hello hello hello"]),
    ("'hello hello hello'.split(' ', 2)", ["hello", "hello hello"]),
    ("'tacocat'.substring(4)", "cat"),
    ("'tacocat'.substring(0, 4)", "taco"),
    ("'  \\ttrim\\n    '.trim()", "trim"),
]


@pytest.mark.parametrize(("expression", "expected"), STRINGS_EXAMPLES)
def test_the_strings_functions_behave_as_cel_go_documents(expression: str, expected: Any) -> None:
    assert cel.evaluate(expression, cel.Context(functions=dict(crd_cel.LIBRARY))) == expected


def test_every_strings_function_handed_to_the_engine_has_an_example() -> None:
    assert set(crd_cel.LIBRARY) == {re.findall(r"\.(\w+)\(", e)[-1] for e, _ in STRINGS_EXAMPLES}
