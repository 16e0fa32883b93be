"""Reports of an evaluation: JSON (the machine-readable record and the next run's baseline), Markdown (a
pull-request comment, with the per-case diff against a baseline), JUnit XML (CI test views), one
self-contained HTML file, and the terminal tables.
"""
