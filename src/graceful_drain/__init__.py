"""graceful-drain: keep single-replica Deployments available through node drains."""
