"""Part 1: the eviction webhook under load."""
