"""Offline evaluation: a ground-truth dataset, run files of what the agent did, metrics, reports and a CI gate.

Kept import-free: importing one module of it (the CLI imports the runner) must not load the reports.
"""
