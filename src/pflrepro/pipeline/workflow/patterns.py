"""The path patterns of the workflow's outputs and logs, each defined once.

:func:`pattern` fills a pattern's fixed parts (e.g. a figure's ``ext``) and leaves its
wildcards.
"""

from __future__ import annotations

import string

from pflrepro.reporting.claims.parse import CLAIMS_TABLES  # noqa: F401 (re-exported)
from pflrepro.store.paths import DATA_DIR


def pattern(template: str, **fields: object) -> str:
    """``template`` with the named ``{fields}`` filled in and every other ``{...}`` kept.

    Unlike ``str.format`` it leaves the fields it is not given (Snakemake wildcards)
    as they are, e.g. ``pattern(FIGURE, kind="accuracy", ext="pdf")`` is
    ``"figures/{experiment}-accuracy.pdf"``. Values go in verbatim, so a value
    ``"{table}"`` renames a wildcard. A name that is not a plain field of ``template``
    (``{name}``, not ``{name,regex}``) raises ``KeyError``: a typo would otherwise
    leave the pattern unchanged.
    """
    out: list[str] = []
    used: set[str] = set()
    for literal, field, spec, conversion in string.Formatter().parse(template):
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if field is None:
            continue
        if field in fields and not spec and conversion is None:
            out.append(str(fields[field]))
            used.add(field)
        else:
            out.append("{" + field + (f"!{conversion}" if conversion else "")
                       + (f":{spec}" if spec else "") + "}")
    unknown = sorted(set(fields) - used)
    if unknown:
        raise KeyError(f"{unknown} not plain fields of the pattern {template!r}")
    return "".join(out)


DATA_META = DATA_DIR + "/meta.json"
DATA_X = DATA_DIR + "/x.npy"
DATA_Y = DATA_DIR + "/y.npy"
#: Where a data set's downloaded (or placed) raw files go (``pflrepro prepare --raw``).
RAW_DIR = "data/raw/{dataset}"
#: Time and memory of each train job (Snakemake's ``benchmark``).
BENCHMARK = ("results/benchmarks/train/{experiment}/{partition}/{method}/"
             "split{split}-seed{seed}.tsv")
TABLE = "results/tables/{experiment}.{ext}"
#: An experiment's communication table (``pflrepro.reporting.communication``).
COMMUNICATION_TABLE = "results/tables/{experiment}-communication.{ext}"
#: An experiment's compute-cost table (``pflrepro.reporting.cost``; ``kind``: ``cost``), and
#: one projection of the paper-scale grid from them all (``reporting.cost_projection``).
COST_TABLE = "results/tables/{experiment}-{kind}.{ext}"
#: A combined table of the config's ``tables`` (the ``table`` wildcard).
COMBINED_TABLE = pattern(TABLE, experiment="{table}")
#: An experiment's figure; ``kind`` is the ``file`` its figure kind declares
#: (:mod:`pflrepro.config.figure_kinds`), whose ``{method}`` and ``{client}`` are
#: filled per figure here and are wildcards of the plot rules.
FIGURE = "figures/{experiment}-{kind}.{ext}"
FIGURE_LOG = "logs/plot/{experiment}-{kind}.log"
PARTITION_STATS = "results/partitions/{dataset}/{partition}/split{split}-{kind}"
PARTITION_FIGURE = "figures/partitions/{dataset}/{partition}-split{split}.{ext}"
#: Each rule's log (its Snakemake ``log:``), by rule; the training jobs' are TRAIN_LOG
#: and BATCH_LOG, the plot rules' FIGURE_LOG.
PREPARE_LOG = "logs/prepare_data/{dataset}.log"
PARTITION_LOG = "logs/partition/{dataset}/{partition}/split{split}.log"
PARTITION_STATS_LOG = "logs/partition_stats/{dataset}/{partition}/split{split}.log"
PARTITION_FIGURE_LOG = "logs/plot_partition/{dataset}/{partition}/split{split}.log"
PUBLIC_LOG = "logs/public_set/{dataset}/{partition}/split{split}-{source}{size}.log"
METHOD_AGGREGATE_LOG = "logs/aggregate/{experiment}/{method}.log"
AGGREGATE_LOG = "logs/aggregate/{experiment}.log"
COST_LOG = "logs/cost/{experiment}.log"
TABLE_LOG = "logs/table/{experiment}.log"
COMBINED_TABLE_LOG = pattern(TABLE_LOG, experiment="{table}")
COMMUNICATION_LOG = "logs/communication/{experiment}.log"
CLAIMS_LOG = "logs/claims/{claims}.log"
PAPER_TABLE_LOG = "logs/paper_table/{paper_table}.log"
REPORT_TABLE_LOG = "logs/report_table/{name}.log"
#: The claims file, relative to the Snakefile's directory (not the working directory).
CLAIMS_FILE = "config/claims.yaml"
CLAIMS_TABLE = pattern(TABLE, experiment="{claims}")

#: Partial tables written after a failed workflow (:mod:`pflrepro.reporting.partial`).
PARTIAL_REPORT = "results/partial/{experiment}.{ext}"
TRAIN_LOG = "logs/train/{experiment}/{partition}/{method}/split{split}-seed{seed}.log"
