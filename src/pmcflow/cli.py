"""The ``pmcflow`` command line.

Each subcommand is a thin wrapper over the same function the Snakemake rule calls; modules are
imported lazily so ``pmcflow jats`` does not pay for torch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# name -> (module, function, one-line help).  The function takes argv (list[str]) and returns an
# exit code; it builds its own argparse parser so each stage owns its options.
COMMANDS: dict[str, tuple[str, str, str]] = {}


def register(name: str, module: str, func: str, help_: str) -> None:
    COMMANDS[name] = (module, func, help_)


register("jats", "pmcflow.jats", "cli", "Parse JATS files; print one JSON object per figure.")


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: pmcflow <command> [options]", "", "commands:"]
    lines += [f"  {n.ljust(width)}  {COMMANDS[n][2]}" for n in sorted(COMMANDS)]
    lines += ["", "Run 'pmcflow <command> --help' for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
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
    return int(fn(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
