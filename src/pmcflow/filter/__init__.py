"""Filter stage: licence, retraction, crop checks, caption quality, modality classifier, corpus-wide
near-duplicate removal (pHash).  See ``docs/filter.md``.

Public API: :func:`filter_chunk`, :func:`phash_chunk`, :func:`find_duplicates`, :func:`summarize`
(:mod:`.stage`); :func:`train_modality`, :func:`predict_modality` (:mod:`.modality`);
:func:`phash_hex`, :func:`cluster_duplicates` (:mod:`.phash`).
"""

from pmcflow.filter.phash import cluster_duplicates, hamming, phash_hex
from pmcflow.filter.stage import filter_chunk, find_duplicates, phash_chunk, summarize

__all__ = [
    "cluster_duplicates",
    "filter_chunk",
    "find_duplicates",
    "hamming",
    "phash_chunk",
    "phash_hex",
    "summarize",
]
