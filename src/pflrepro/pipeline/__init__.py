"""The pipeline glue: Snakemake's adapters and the jobs its rules run.

It turns a parsed config (:mod:`pflrepro.config`, :mod:`pflrepro.tuning`) into jobs and
paths (:mod:`~pflrepro.pipeline.workflow` and the modules the Snakefile and the rules
import), and holds the job entry points: a training job
(:mod:`~pflrepro.pipeline.train_job`), one run for people
(:mod:`~pflrepro.pipeline.single`) and the tuning jobs
(:mod:`~pflrepro.pipeline.tuning_jobs`). It may import every layer below it,
:mod:`pflrepro.reporting` included; :mod:`pflrepro.inspect` (people's tools) and
:mod:`pflrepro.cli` are above.
"""
