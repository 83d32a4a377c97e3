"""What a simulated container runtime hands out: image references, container IDs,
pod IPs, crash back-off. Pure helpers for the kubelet.
"""

from __future__ import annotations

import hashlib
import ipaddress

from kubesim.backoff import Backoff


def normalize_image(image: str) -> tuple[str, str]:
    """containerd's normalised reference and repository: nginx is docker.io/library/nginx:latest."""
    name, digest = [*image.split("@", 1), ""][:2]
    first, _, rest = name.partition("/")
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name}" if rest else f"docker.io/library/{name}"
    repo = name
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repo = name[: len(name) - len(last)] + last.split(":", 1)[0]
    elif not digest:
        name += ":latest"
    if digest:
        return f"{repo}@{digest}", repo
    return name, repo


def image_id(image: str) -> str:
    """The digest-pinned imageID the runtime reports for an image."""
    ref, repo = normalize_image(image)
    if "@" in ref:
        return ref
    return f"{repo}@sha256:{hashlib.sha256(ref.encode()).hexdigest()}"


def container_id(pod_uid: str, name: str, restart: int) -> str:
    digest = hashlib.sha256(f"{pod_uid}/{name}/{restart}".encode()).hexdigest()
    return f"containerd://{digest}"


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String(): "10s", "1m20s", "5m0s", "20ms", "1.5s"."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _fraction(nanos, size) + unit
    hours, rem = divmod(nanos, 3600 * 10**9)
    minutes, rem = divmod(rem, 60 * 10**9)
    text = _fraction(rem, 10**9) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


class CrashBackoff:
    """One container's crash back-off (the kubelet's flowcontrol.Backoff, no jitter).

    The first exit restarts at once; each later exit waits the current delay, which then
    doubles up to the cap. A quiet spell of twice the cap starts it afresh.
    """

    def __init__(self, initial: float, maximum: float) -> None:
        self.maximum = maximum
        self._delays = Backoff(initial, maximum)
        self._crashed = False
        self.last_update = 0.0

    def next_delay(self, now: float) -> float:
        """The wait before restarting a container that exited at `now`."""
        if not self._crashed or now - self.last_update > 2 * self.maximum:
            self._crashed = True
            self._delays.reset()
            self.last_update = now
            return 0.0
        delay = self._delays.next_delay()
        self.last_update = now + delay
        return delay


class IpPool:
    """host-local IPAM over a pod CIDR: sequential, skipping the gateway, reusing freed IPs."""

    def __init__(self, cidr: str) -> None:
        self._hosts = [str(ip) for ip in ipaddress.ip_network(cidr, strict=False).hosts()][1:]
        self._by_owner: dict[str, str] = {}
        self._next = 0

    def allocate(self, owner: str) -> str:
        if owner in self._by_owner:
            return self._by_owner[owner]
        used = set(self._by_owner.values())
        for step in range(len(self._hosts)):
            candidate = self._hosts[(self._next + step) % len(self._hosts)]
            if candidate not in used:
                self._next = (self._next + step + 1) % len(self._hosts)
                self._by_owner[owner] = candidate
                return candidate
        raise RuntimeError("no IP addresses available in range set")

    def release(self, owner: str) -> None:
        self._by_owner.pop(owner, None)
