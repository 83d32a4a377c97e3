"""Settings of a simulated kubelet; defaults are the real kubelet's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    # Lease renewal: nodeLeaseDurationSeconds (40) * 0.25, as the kubelet's lease controller.
    heartbeat_interval: float = 10.0
    lease_duration_seconds: int = 40
    # nodeStatusReportFrequency: how often an unchanged node status is re-posted.
    node_status_report_interval: float = 300.0
    # evictionMonitoringPeriod and evictionPressureTransitionPeriod.
    eviction_monitoring_interval: float = 10.0
    pressure_transition_period: float = 300.0
    # crash back-off: kubelet's initial 10s, capped at MaxContainerBackOff (5m).
    backoff_initial: float = 10.0
    backoff_max: float = 300.0
    # kuberuntime's minimumGracePeriodInSeconds: no kill gives a container less.
    minimum_kill_grace: float = 2.0
    pod_cidr: str = "10.244.0.0/24"
    host_ip: str = "10.0.0.2"
    # Pulled/Created/Started/Killing/BackOff events on pods.
    container_events: bool = True
    # A standalone kubelet watches only its pods (fieldSelector spec.nodeName=<node>), as the
    # real one does; a NodeSet shares one unfiltered watch between its kubelets instead.
    use_field_selector: bool = True
