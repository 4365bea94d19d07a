"""Rebuild the embedded demo corpus (demo/corpus) from demo/sources/jats.

Thin wrapper over ``pmcflow build-demo-corpus`` (logic in pmcflow.synth.democorpus)::

    python scripts/build_demo_corpus.py --out demo/corpus
"""

from __future__ import annotations

import sys

from pmcflow.synth.democorpus import cli

if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
