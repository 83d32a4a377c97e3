"""Part 3: drains to completion on kubesim, with graceful-drain and its alternatives."""
