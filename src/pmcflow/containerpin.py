"""Container images pinned by digest (standard library only: the workflow loads it at parse time).

A ``containers:`` entry is an image reference, optionally pinned: ``containers/base.sif@sha256:<hex>``
(a local image file and the SHA-256 of its bytes), or a registry URI such as
``oras://ghcr.io/lab/pmcflow-base:0.1@sha256:<hex>`` / ``docker://...@sha256:<hex>`` (pinned by the
registry; passed to Apptainer as is). Before a run that deploys rules in containers, every local
image a rule uses is hashed and compared with its pin; a mismatch stops the run naming the file.

``python -m pmcflow.containerpin OUT.yaml NAME=IMAGE.sif ...`` writes a config overlay that pins
freshly built images (``make containers`` does this: ``containers/images.yaml``).
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

_PIN = re.compile(r"^(?P<ref>.+)@sha256:(?P<digest>[0-9a-f]{64})$")
_URI = re.compile(r"^[a-z][a-z0-9+.-]*://")


def split(ref: str) -> tuple[str, str | None]:
    """``(image, sha256 hex or None)`` of a container reference."""
    m = _PIN.match(ref)
    return (m.group("ref"), m.group("digest")) if m else (ref, None)


def is_local(image: str) -> bool:
    return not _URI.match(image)


def sha256_file(path: str | Path, bufsize: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(bufsize):
            h.update(chunk)
    return h.hexdigest()


def rule_image(ref: str) -> str:
    """What a rule's ``container:`` gets: a local file without its pin (Apptainer runs the file),
    a registry URI with it (the registry resolves the digest)."""
    image, digest = split(ref)
    return image if digest and is_local(image) else ref


def problems(images: dict[str, str], used: set[str], base: str | Path = ".") -> tuple[list[str], list[str]]:
    """``(errors, warnings)`` for the images in ``used`` (config keys): a local file that is missing
    or whose bytes do not match its pin is an error; an unpinned local image is a warning."""
    errors: list[str] = []
    warnings: list[str] = []
    for key in sorted(used):
        image, digest = split(images[key])
        if not is_local(image):
            continue
        path = Path(base) / image
        if not path.is_file():
            errors.append(f"containers.{key}: {image} does not exist (make containers builds it)")
        elif digest is None:
            warnings.append(
                f"containers.{key}: {image} is not pinned by digest (make containers writes "
                "containers/images.yaml; pass it after your config)"
            )
        elif (have := sha256_file(path)) != digest:
            errors.append(f"containers.{key}: {image} has sha256 {have}, the config pins {digest}")
    return errors, warnings


def write_overlay(out: str | Path, images: dict[str, str | Path]) -> str:
    lines = ["# Written by `make containers`: the images built here, pinned by the SHA-256 of their",
             "# bytes. Pass it after your config: --configfile config/config.yaml containers/images.yaml",
             "containers:"]
    for key, path in sorted(images.items()):
        lines.append(f"  {key}: {Path(path).as_posix()}@sha256:{sha256_file(path)}")
    text = "\n".join(lines) + "\n"
    Path(out).write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or any("=" not in a for a in args[1:]):
        print("usage: python -m pmcflow.containerpin OUT.yaml NAME=IMAGE.sif ...", file=sys.stderr)
        return 2
    images = dict(a.split("=", 1) for a in args[1:])
    missing = [p for p in images.values() if not Path(p).is_file()]
    if missing:
        print(f"containerpin: no such image: {', '.join(missing)}", file=sys.stderr)
        return 1
    sys.stdout.write(write_overlay(args[0], images))
    return 0


if __name__ == "__main__":
    sys.exit(main())
