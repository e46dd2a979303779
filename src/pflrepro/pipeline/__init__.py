"""The pipeline glue: Snakemake's adapters, training and tuning jobs, status and verification.

It turns a parsed config (:mod:`pflrepro.config`, :mod:`pflrepro.tuning`) into jobs and
paths, runs a training job, and checks what the workflow stored. It may import every
layer below it, :mod:`pflrepro.reporting` included; only :mod:`pflrepro.cli` is above.
"""
