"""Kubernetes object-name rules (apimachinery validation), shared by config and the webhook."""

from __future__ import annotations

import functools
import re

DNS_SUBDOMAIN_MAX = 253
DNS_LABEL_MAX = 63
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def is_dns_subdomain(name: str) -> bool:
    """validation.IsDNS1123Subdomain: most object names, e.g. a pod's."""
    return len(name) <= DNS_SUBDOMAIN_MAX and DNS_SUBDOMAIN.fullmatch(name) is not None


@functools.lru_cache(maxsize=1024)
def is_dns_label(name: str) -> bool:
    """validation.IsDNS1123Label: namespaces, Services. Remembered (a bounded cache): the
    webhook checks every eviction's namespace, and a cluster has few."""
    return len(name) <= DNS_LABEL_MAX and DNS_LABEL.fullmatch(name) is not None
