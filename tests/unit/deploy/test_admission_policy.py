"""The shipped ValidatingAdmissionPolicy, its CEL evaluated as rendered by `kubectl kustomize`.

cel-python evaluates standard CEL, not Kubernetes' type-checked dialect: this proves what the
expressions decide for the controller's own writes and for broader ones. That kube-apiserver
compiles them and refuses a broader patch by the ServiceAccount is for the real control plane
(docs/reliability.md says what that test checks).
"""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

from tests.unit.deploy.rendered import NAMESPACE, SELF_SIGNED, SERVICE_ACCOUNT, Obj, objects, one

CONTROLLER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
RESTARTED_AT = "graceful-drain.stonal.com/restarted-at"
COMPLETED_AT = "graceful-drain.stonal.com/completed-at"
EVICTIONS = "graceful-drain.stonal.com/evictions"
TEMPLATE_RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def policy() -> Obj:
    return one(objects(SELF_SIGNED), "ValidatingAdmissionPolicy")


def _run(env: celpy.Environment, expression: str, activation: dict[str, Any]) -> Any:
    return env.program(env.compile(expression)).evaluate(activation)


def refusals(old: Obj, new: Obj, *, resource: str, user: str = CONTROLLER) -> list[str] | None:
    """The messages of the validations that refuse old -> new; None if the policy does not
    apply to the request (matchConditions)."""
    spec = policy()["spec"]
    env = celpy.Environment()
    request = {"userInfo": {"username": user}, "resource": {"resource": resource},
               "operation": "UPDATE"}  # fmt: skip
    activation: dict[str, Any] = {
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel(request),
    }
    for condition in spec["matchConditions"]:
        if not _run(env, condition["expression"], activation):
            return None
    variables: dict[celtypes.StringType, Any] = {}
    for variable in spec["variables"]:
        activation["variables"] = celtypes.MapType(variables)
        variables[celtypes.StringType(variable["name"])] = _run(
            env, variable["expression"], activation
        )
    activation["variables"] = celtypes.MapType(variables)
    refused = []
    for validation in spec["validations"]:
        result = _run(env, validation["expression"], activation)
        assert isinstance(result, celtypes.BoolType), (validation["expression"], result)
        if not result:
            refused.append(validation["message"])
    return refused


DEPLOYMENT: Obj = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                 "annotations": {"deployment.kubernetes.io/revision": "1"}},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "strategy": {"type": "RollingUpdate",
                     "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "revisionHistoryLimit": 10,
        "progressDeadlineSeconds": 600,
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
        },
    },
}  # fmt: skip


def changed(base: Obj, edit: Any) -> Obj:
    new = copy.deepcopy(base)
    edit(new)
    return new


def stamped(obj: Obj) -> None:
    obj["metadata"]["annotations"][RESTARTED_AT] = "2026-12-01T12:00:00Z"


def completed(obj: Obj) -> None:
    obj["metadata"]["annotations"][COMPLETED_AT] = "2026-12-01T12:00:30Z"


def recorded(obj: Obj) -> None:
    obj["metadata"]["annotations"][EVICTIONS] = (
        '{"web-1":{"uid":"u","at":"2026-12-01T12:00:00.000000Z"}}'
    )


def restarted(obj: Obj) -> None:
    obj["spec"]["template"]["metadata"]["annotations"] = {
        TEMPLATE_RESTARTED_AT: "2026-12-01T12:00:00Z"
    }


@pytest.mark.parametrize(
    "edit",
    [stamped, restarted, completed, recorded],
    ids=["stamp restarted-at", "template restartedAt", "mark completed-at", "record eviction"],
)
def test_the_controllers_own_deployment_writes_pass(edit: Any) -> None:
    assert refusals(DEPLOYMENT, changed(DEPLOYMENT, edit), resource="deployments") == []


def test_removing_the_stamp_passes() -> None:
    with_stamp = changed(DEPLOYMENT, stamped)
    assert refusals(with_stamp, DEPLOYMENT, resource="deployments") == []


def test_cleaning_the_evictions_ledger_passes() -> None:
    """The reconciler removes the ledger once its entries expired."""
    with_ledger = changed(DEPLOYMENT, recorded)
    assert refusals(with_ledger, DEPLOYMENT, resource="deployments") == []


def test_retiring_a_completed_drain_passes() -> None:
    """The reconciler's last write: restarted-at and completed-at go together."""
    done = changed(changed(DEPLOYMENT, stamped), completed)
    assert refusals(done, DEPLOYMENT, resource="deployments") == []


def test_changing_the_template_restarted_at_again_passes() -> None:
    first = changed(DEPLOYMENT, restarted)
    second = changed(first, lambda o: o["spec"]["template"]["metadata"]["annotations"].update(
        {TEMPLATE_RESTARTED_AT: "2026-12-01T13:00:00Z"}))  # fmt: skip
    assert refusals(first, second, resource="deployments") == []


BROADER: dict[str, Any] = {
    "image": lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image="evil:1"),
    "replicas": lambda o: o["spec"].update(replicas=0),
    "strategy": lambda o: o["spec"].update(strategy={"type": "Recreate"}),
    "paused": lambda o: o["spec"].update(paused=True),
    "another annotation": lambda o: o["metadata"]["annotations"].update(x="y"),
    "an annotation removed": lambda o: o["metadata"]["annotations"].clear(),
    "a label": lambda o: o["metadata"]["labels"].update(app="other"),
    "a template label": lambda o: o["spec"]["template"]["metadata"]["labels"].update(x="y"),
    "a template annotation": lambda o: o["spec"]["template"]["metadata"].update(
        annotations={TEMPLATE_RESTARTED_AT: "t", "sidecar.istio.io/inject": "false"}
    ),
    "a service account": lambda o: o["spec"]["template"]["spec"].update(serviceAccountName="admin"),
}


@pytest.mark.parametrize("name", list(BROADER))
def test_a_broader_deployment_write_by_the_controller_is_refused(name: str) -> None:
    refused = refusals(DEPLOYMENT, changed(DEPLOYMENT, BROADER[name]), resource="deployments")
    assert refused, name


def test_other_users_are_not_judged() -> None:
    broader = changed(DEPLOYMENT, BROADER["image"])
    assert refusals(DEPLOYMENT, broader, resource="deployments", user="alice") is None


CONFIGURATION = one(objects(SELF_SIGNED), "ValidatingWebhookConfiguration")


def with_ca_bundle(obj: Obj, value: str = "Y2E=") -> None:
    for hook in obj["webhooks"]:
        hook["clientConfig"]["caBundle"] = value


def test_writing_the_ca_bundle_passes() -> None:
    first = changed(CONFIGURATION, with_ca_bundle)
    assert refusals(CONFIGURATION, first, resource="validatingwebhookconfigurations") == []
    again = changed(first, lambda o: with_ca_bundle(o, "bmV3"))
    assert refusals(first, again, resource="validatingwebhookconfigurations") == []


BROADER_CONFIGURATION: dict[str, Any] = {
    "failurePolicy": lambda o: o["webhooks"][0].update(failurePolicy="Fail"),
    "timeoutSeconds": lambda o: o["webhooks"][0].update(timeoutSeconds=30),
    "namespaceSelector": lambda o: o["webhooks"][0].update(namespaceSelector={}),
    "rules": lambda o: o["webhooks"][0]["rules"][0].update(operations=["*"]),
    "the service": lambda o: o["webhooks"][0]["clientConfig"]["service"].update(name="evil"),
    "a url": lambda o: o["webhooks"][0]["clientConfig"].update(url="https://evil.example"),
    "another webhook": lambda o: o["webhooks"].append(copy.deepcopy(o["webhooks"][0])),
    "a label": lambda o: o["metadata"].setdefault("labels", {}).update(x="y"),
}


@pytest.mark.parametrize("name", list(BROADER_CONFIGURATION))
def test_a_broader_configuration_write_by_the_controller_is_refused(name: str) -> None:
    new = changed(CONFIGURATION, BROADER_CONFIGURATION[name])
    assert refusals(CONFIGURATION, new, resource="validatingwebhookconfigurations"), name


def test_the_binding_denies() -> None:
    binding = one(objects(SELF_SIGNED), "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy()["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy()["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy()["spec"]["failurePolicy"] == "Fail"
