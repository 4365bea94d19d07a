"""Text enrichment: caption -> per-subfigure subcaption, in-text mentions -> summary.

* :mod:`pmcflow.enrich.rules` — the CPU rule splitter (``split_caption``, ``assign``);
* :mod:`pmcflow.enrich.subcaption` — backends (rules / transformers / vllm) + ``pmcflow split-caption``;
* :mod:`pmcflow.enrich.summary` — mention selection and summaries (extractive / transformers / vllm);
* :mod:`pmcflow.enrich.validate` — parsing and checking LLM answers (verbatim, injection, …);
* :mod:`pmcflow.enrich.evaluate` — splitter quality against human panel segmentation.
"""
