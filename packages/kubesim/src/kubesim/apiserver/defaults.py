"""Defaulting for the kinds we serve, after k8s.io/kubernetes/pkg/apis/*/v1/defaults.go.

Only defaults that clients or our controllers observe are applied; each one
matches its upstream value.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

from kubesim.types import Obj

from .crds import default_crd

_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                   "failureThreshold": 3}  # fmt: skip


def _image_pull_policy(image: str) -> str:
    # SetDefaults_Container: Always for ":latest" or an untagged image, else IfNotPresent.
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _container(c: Obj) -> None:
    if not isinstance(c, dict):
        return
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("imagePullPolicy", _image_pull_policy(str(c.get("image", ""))))
    c.setdefault("resources", {})
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(probe_name)
        if isinstance(probe, dict):
            for k, v in _PROBE_DEFAULTS.items():
                probe.setdefault(k, v)


def pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            _container(c)


def pod_template(template: Obj) -> None:
    template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    if isinstance(spec, dict):
        pod_spec(spec)


def _qos_class(spec: Obj) -> str:
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    requests_any = limits_all = False
    guaranteed = bool(containers)
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        has_both = all(k in lim for k in ("cpu", "memory"))
        same = all(req.get(k, lim.get(k)) == lim.get(k) for k in ("cpu", "memory"))
        if not (has_both and same):
            guaranteed = False
        limits_all = limits_all or bool(lim)
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if requests_any or limits_all else "BestEffort"


def pod(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    pod_spec(spec)
    # Admission plugins every cluster runs: ServiceAccount, DefaultTolerationSeconds, Priority.
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    present = {t.get("key") for t in tolerations if isinstance(t, dict)}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if key not in present:
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(spec))


def deployment(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxSurge", "25%")
        rolling.setdefault("maxUnavailable", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    if spec.get("paused") is False:
        del spec["paused"]  # a Go bool with omitempty: false is never written
    pod_template(spec.setdefault("template", {}))


def replicaset(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    pod_template(spec.setdefault("template", {}))


def statefulset(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    spec.setdefault("revisionHistoryLimit", 10)
    pod_template(spec.setdefault("template", {}))


def daemonset(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault(
        "updateStrategy",
        {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
    )
    spec.setdefault("revisionHistoryLimit", 10)
    pod_template(spec.setdefault("template", {}))


JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def job(obj: Obj) -> None:
    """batch/v1 SetDefaults_Job, and the strategy's generateSelector (PrepareForCreate):
    the template is labelled with the Job's uid and name (legacy keys too), which the
    selector matches, unless ``manualSelector``."""
    spec = obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if spec.get("podFailurePolicy") is None:
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    pod_template(template)
    if not spec.get("manualSelector") and spec.get("selector") is None:
        meta = obj["metadata"]
        uid, name = meta["uid"], meta["name"]
        labels = template["metadata"].setdefault("labels", {})
        labels.update({JOB_CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name,
                       "controller-uid": uid, "job-name": name})  # fmt: skip
        spec["selector"] = {"matchLabels": {JOB_CONTROLLER_UID_LABEL: uid}}
        spec.setdefault("manualSelector", False)
    # A Job without labels of its own takes its template's (SetDefaults_Job).
    if not obj["metadata"].get("labels") and template["metadata"].get("labels"):
        obj["metadata"]["labels"] = dict(template["metadata"]["labels"])


def cronjob(obj: Obj) -> None:
    """batch/v1 SetDefaults_CronJob, and the job template's pod template defaulted as any
    pod template (the Job's own defaults wait for the Job)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.setdefault("jobTemplate", {})
    job_template.setdefault("metadata", {})  # an ObjectMeta struct: `{}` when empty
    job_spec = job_template.setdefault("spec", {})
    pod_template(job_spec.setdefault("template", {}))
    obj.setdefault("status", {})


def namespace(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


def service(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))


def validating_webhook_configuration(obj: Obj) -> None:
    for hook in obj.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("timeoutSeconds", 10)
        service = (hook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)  # SetDefaults_ServiceReference
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def secret(obj: Obj) -> None:
    """stringData is write-only: the v1 conversion merges it into data, base64-encoded, over
    any entry of the same key (Convert_v1_Secret_To_core_Secret), and it is never stored."""
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    obj.setdefault("type", "Opaque")


def pod_disruption_budget(obj: Obj) -> None:
    """A new budget's status is the empty struct, whose counters are not omitempty
    (pkg/registry/policy/poddisruptionbudget/strategy.go PrepareForCreate)."""
    if "status" not in obj:
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                         "expectedPods": 0}  # fmt: skip


# The core/v1 Event fields Go always writes (structs and times without omitempty's effect,
# strings without omitempty), as a real server answers them.
EVENT_ZERO_VALUES: dict[str, Any] = {"involvedObject": {}, "source": {}, "firstTimestamp": None,
                     "lastTimestamp": None, "eventTime": None, "reportingComponent": "",
                     "reportingInstance": ""}  # fmt: skip


def event(obj: Obj) -> None:
    for key, zero in EVENT_ZERO_VALUES.items():
        if obj.get(key) is None:
            obj[key] = copy.deepcopy(zero)


_HPA_SCALE_UP = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                 {"type": "Percent", "value": 100, "periodSeconds": 15}],
}  # fmt: skip
_HPA_SCALE_DOWN = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


def _hpa_rules(rules: Any, default: Obj) -> Obj:
    """copyHPAScalingRules: the default rules, with whatever the client set over them."""
    out = copy.deepcopy(default)
    if isinstance(rules, dict):
        for key in ("selectPolicy", "stabilizationWindowSeconds", "policies", "tolerance"):
            if rules.get(key) is not None:
                out[key] = rules[key]
    return out


def horizontal_pod_autoscaler(obj: Obj) -> None:
    """pkg/apis/autoscaling/v2/defaults.go; a new autoscaler's status is the empty struct
    (strategy.go PrepareForCreate), whose desiredReplicas is not omitempty."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        target = {"type": "Utilization", "averageUtilization": 80}
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _hpa_rules(behavior.get("scaleUp"), _HPA_SCALE_UP)
        behavior["scaleDown"] = _hpa_rules(behavior.get("scaleDown"), _HPA_SCALE_DOWN)
    status = obj.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("desiredReplicas", 0)


DEFAULTERS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("", "Event"): event,
    ("policy", "PodDisruptionBudget"): pod_disruption_budget,
    ("", "Pod"): pod,
    ("", "Secret"): secret,
    ("", "Namespace"): namespace,
    ("", "Service"): service,
    ("apps", "Deployment"): deployment,
    ("apps", "ReplicaSet"): replicaset,
    ("apps", "StatefulSet"): statefulset,
    ("apps", "DaemonSet"): daemonset,
    ("batch", "Job"): job,
    ("batch", "CronJob"): cronjob,
    ("autoscaling", "HorizontalPodAutoscaler"): horizontal_pod_autoscaler,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): default_crd,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (
        validating_webhook_configuration
    ),
}


def apply_defaults(group: str, kind: str, obj: Obj) -> None:
    defaulter = DEFAULTERS.get((group, kind))
    if defaulter is not None:
        defaulter(obj)
