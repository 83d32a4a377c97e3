"""`graceful-drain demo`: the eviction dance on an in-process cluster, with a timeline.

    graceful-drain demo [--client kubectl|karpenter|cluster-autoscaler] [--compare] [--json]

kubesim runs in this process with two nodes and one single-replica Deployment (maxSurge 1,
maxUnavailable 0, a readiness delay) on node-a; the controller runs here too, its webhook
registered as deploy/ registers it and served over TLS; a drain client drains node-a. The
timeline and the figures come from what the API shows (watches) and what the drain client was
answered, never from the controller's insides.

Modules: options (flags), workload (the cluster and Deployment), registration (the webhook's
configuration and certificate), observe (what the run records), timeline and report (pure:
records to text and JSON), run (one run, and the subcommand).
"""
