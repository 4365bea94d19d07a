"""HPC helpers: a throw-away single-node Slurm cluster, derived profiles, workflow copies.

Used by the Slurm / rerun / crash integration tests and by the DAG-scale benchmark. Nothing here
runs inside a rule; the workflow itself never imports this package.
"""
