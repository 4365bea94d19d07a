"""Rule compare_embeddings: t-SNE maps and MMD tests between the evaluated models' image
embeddings (pmcflow.encoders.compare)."""
import logging

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.encoders.compare import compare_models  # noqa: E402
from pmcflow.encoders.settings import EmbeddingSettings  # noqa: E402

sm = snakemake  # noqa: F821
compare_models(
    dict(zip(sm.params.models, sm.input, strict=True)),
    EmbeddingSettings.from_section(sm.params.embedding),
    int(sm.params.seed),
    sm.output,
    log=logging.getLogger("pmcflow.compare").info,
)
