"""The ``pmcflow`` command line.

Each subcommand is a thin wrapper over the same function the Snakemake rule calls; modules are
imported lazily so ``pmcflow jats`` does not pay for torch.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence

from pmcflow.errors import RejectionError
from pmcflow.runlock import LockHeld

# Errors a user causes (a missing file, a bad value, an invalid config): one line and exit 1, not a
# traceback. --verbose or PMCFLOW_TRACEBACK=1 shows the traceback. Anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, RejectionError, LockHeld)

# name -> (module, function, one-line help).  The function takes argv (list[str]) and returns an
# exit code; it builds its own argparse parser so each stage owns its options.
COMMANDS: dict[str, tuple[str, str, str]] = {}


def register(name: str, module: str, func: str, help_: str) -> None:
    COMMANDS[name] = (module, func, help_)


register("jats", "pmcflow.jats", "cli", "Parse JATS files; print one JSON object per figure.")
register("parse-chunk", "pmcflow.jats", "cli_parse_chunk", "Parse one acquired chunk into articles/figures/mentions tables.")
register("list-articles", "pmcflow.pmc.stage", "cli_list", "Enumerate article versions from the source and assign chunks.")
register("acquire-chunk", "pmcflow.pmc.stage", "cli_acquire", "Download and verify the articles of one chunk.")
register("retry-failed", "pmcflow.pmc.stage", "cli_retry_failed", "Re-acquire the articles pending a retry after transient failures.")
register("unlock", "pmcflow.pmc.stage", "cli_unlock", "Remove the lock of a results folder or cache left by a run that is gone.")
register("serve-mock", "pmcflow.pmc.mockserver", "cli", "Serve a PMC layout over loopback HTTP, optionally injecting faults.")
register("build-demo-corpus", "pmcflow.synth.democorpus", "cli", "Rebuild the embedded demo corpus (cloud + legacy layouts).")
register("render", "pmcflow.synth.render", "cli", "Render synthetic compound figures with COCO/YOLO annotations.")
register("sources", "pmcflow.synth.sourcecheck", "cli", "Check a synth sources file: datasets, licences, usable images per split and modality.")
register("train-detector", "pmcflow.detect.cli", "train", "Train a subfigure detector backend.")
register("detect", "pmcflow.detect.cli", "detect", "Detect subfigures; write COCO results json.")
register("eval-boxes", "pmcflow.detect.cli", "eval_boxes", "COCO mAP and F1@0.5 of predictions against ground truth.")
register("outputs", "pmcflow.outputs", "cli", "Show where a run's outputs are and what each stage kept/rejected.")
register("decompose", "pmcflow.decompose.cli", "cli", "Decompose figure images into subfigures (boxes, crops, panel letters).")
register("subcaption-chunk", "pmcflow.enrich.stage", "cli_subcaption", "The subcaption step of one chunk (its own GPU job in the workflow).")
register("enrich-chunk", "pmcflow.enrich.stage", "cli", "Enrich one chunk's subfigures with subcaptions and summaries.")
register("shard", "pmcflow.shard", "cli", "Write WebDataset shards, Parquet index, sizes.json and manifest.")
register("train-encoder", "pmcflow.encoders.train", "cli", "Train an image-text encoder with open_clip on the shards.")
register("evaluate-encoder", "pmcflow.encoders.evaluate", "cli", "Retrieval Recall@K and zero-shot metrics of a trained encoder.")
register("benchmarks", "pmcflow.encoders.benchmarks", "cli_list", "The evaluation benchmarks of seed 000 (6 retrieval, 19 zero-shot tasks): names, classes, sources, licences.")
register("build-demo-benchmarks", "pmcflow.encoders.benchmarks", "cli_build", "Build small real offline benchmarks from images inside installed packages.")
register("fetch-benchmarks", "pmcflow.encoders.benchmarks", "cli_fetch", "Download the openly downloadable benchmarks (checksums verified); nothing else.")
register("fetch-models", "pmcflow.models", "cli", "Download the hub models the config names into the HF cache and lock them; --check verifies offline.")
register("train-modality", "pmcflow.filter.modality", "cli", "Train the subfigure modality classifier.")
register("eval-modality", "pmcflow.filter.modality", "cli_eval", "Score the modality classifier on hand-labelled real panels.")
register("phash-chunk", "pmcflow.filter.stage", "cli_phash", "Filter checks, modality and pHash of one chunk.")
register("find-duplicates", "pmcflow.filter.stage", "cli_duplicates", "Corpus-wide near-duplicate clusters from phash tables.")
register("filter-chunk", "pmcflow.filter.stage", "cli", "Filter one chunk's enriched rows into dataset rows.")
register("report", "pmcflow.report", "cli", "Execute a report notebook (papermill) and write self-contained HTML.")
register("report-screenshots", "pmcflow.report.screenshot", "cli", "Screenshot rendered report pages with a headless Chromium.")
register("split-caption", "pmcflow.enrich.subcaption", "cli", "Split captions (JSON lines on stdin) into labelled segments.")
register("eval-subcaptions", "pmcflow.enrich.evaluate", "cli", "Score caption splitting against gold panel segmentations (JSON lines).")


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: pmcflow [-q | -v] <command> [options]", "", "options:"]
    lines += ["  -q, --quiet    warnings and errors only", "  -v, --verbose  debug logging; tracebacks for user errors"]
    lines += ["", "commands:"]
    lines += [f"  {n.ljust(width)}  {COMMANDS[n][2]}" for n in sorted(COMMANDS)]
    lines += ["", "Run 'pmcflow <command> --help' for a command's options."]
    return "\n".join(lines)


def _configure_logging(level: int) -> None:
    """One logging setup for every subcommand (stderr; stages log progress at INFO)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    root.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    level, verbose = logging.INFO, False
    while args and args[0] in {"-q", "--quiet", "-v", "--verbose"}:
        quiet = args.pop(0) in {"-q", "--quiet"}
        level, verbose = (logging.WARNING, False) if quiet else (logging.DEBUG, True)
    _configure_logging(level)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    if args[0] in {"-V", "--version"}:
        from pmcflow import __version__

        print(f"pmcflow {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"pmcflow: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    fn = getattr(importlib.import_module(module), func)
    try:
        return int(fn(rest) or 0)
    except KeyboardInterrupt:
        print(f"pmcflow {name}: interrupted", file=sys.stderr)
        return 130
    except USER_ERRORS as exc:
        if verbose or os.environ.get("PMCFLOW_TRACEBACK"):
            raise
        print(f"pmcflow {name}: error: {one_line(exc)}", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """The exception as one line: its message (multi-line messages joined), else its type."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    if isinstance(exc, FileNotFoundError) and exc.strerror is None:  # raised with only a path
        return f"no such file or directory: {text}"
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        text = f"{text}: {exc.filename}"
    return text or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
