"""Where the workflow stores what it reads back: path patterns of the stored artefacts.

Kept apart from :mod:`pflrepro.pipeline.workflow` (which re-exports them) so that the file
readers in :mod:`pflrepro.store.io` can check a file against its place without importing the
workflow's helpers, and so stay out of the training code's digest.
"""

from __future__ import annotations

DATA_DIR = "results/data/{dataset}"
PARTITION = "results/partitions/{dataset}/{partition}/split{split}.parquet"
RUN = "results/runs/{experiment}/{partition}/{method}/split{split}-seed{seed}.parquet"
METHOD_AGGREGATE = "results/aggregate/{experiment}/{method}.parquet"
AGGREGATE = "results/aggregate/{experiment}.parquet"
PUBLIC = "results/public/{dataset}/{partition}/split{split}-{source}{size}.parquet"
