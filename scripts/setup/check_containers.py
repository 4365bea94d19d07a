#!/usr/bin/env python3
"""Check the Apptainer definitions in containers/ without Apptainer, and optionally run one's %post.

Static checks (default, seconds):
  * every definition parses: header (Bootstrap/From/OSVersion/MirrorURL...) and % sections;
  * it has %labels, %help, %post and %test, and its %files sources exist;
  * its base is pinned: docker/oras/library ``From:`` by ``@sha256:`` digest, debootstrap by a
    snapshot.debian.org timestamp, localimage only on another containers/*.sif built from a
    definition here (which is itself pinned);
  * every ``pip install`` in %post names exact pins (``name==version``) or requirement files that
    %files copies in, and a pin of a package that requirements/lock.txt (or the requirement file
    the definition installs) also pins has the same version;
  * requirement files the images install pin every package (``==``); ranges are reported;
  * mmdet.def builds the mmcv version that scripts/setup/build_mmcv.sh defaults to;
  * ``--rules``: every rule of the workflow has a ``container:`` that is pinned (a digest, or a
    containers/*.sif whose .def exists here).

``--run-post NAME`` runs NAME.def's %post in a debootstrap root filesystem (needs root and
debootstrap; pip only resolves, PMCFLOW_PIP_DRY_RUN=1), which catches wrong apt package names,
missing files and unresolvable pins before anyone waits for an image build.

Exit status 1 when any check fails. ``make containers`` (containers/Makefile.inc) runs the static
checks before building.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTAINERS = REPO / "containers"
LOCK = REPO / "requirements" / "lock.txt"
REQUIRED_SECTIONS = ("labels", "help", "post", "test")
KNOWN_SECTIONS = {
    "setup", "files", "environment", "post", "runscript", "startscript", "test", "labels", "help",
    "arguments", "app",
}  # fmt: skip
SNAPSHOT_RE = re.compile(r"^https?://snapshot\.debian\.org/archive/debian/(\d{8}T\d{6}Z)/?$")
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")
PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)(\[[^\]]*\])?==([A-Za-z0-9_.+!\-]+)$")
FALLBACK_MIRROR = "http://deb.debian.org/debian"
# The python3 each Debian release pinned by a debootstrap definition ships: every pin the image
# installs must accept it (a lock resolved on a newer 3.11.x can carry Requires-Python >= 3.11.5).
DEBIAN_PYTHON = {"bullseye": "3.9.2", "bookworm": "3.11.2", "trixie": "3.13.5"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Definition:
    path: Path
    header: dict[str, str] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.stem

    def files(self) -> list[tuple[str, str]]:
        pairs = []
        for line in self.sections.get("files", "").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                parts = line.split()
                pairs.append((parts[0], parts[1] if len(parts) > 1 else parts[0]))
        return pairs

    def arguments(self) -> dict[str, str]:
        out = {}
        for line in self.sections.get("arguments", "").splitlines():
            line = line.strip()
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
        return out


def parse_def(path: Path) -> Definition:
    d = Definition(path)
    current: str | None = None
    body: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^%(\w+)\b", raw)
        if m:
            if current:
                d.sections[current] = "\n".join(body).strip("\n")
            current, body = m.group(1).lower(), []
            if current not in KNOWN_SECTIONS:
                raise ValueError(f"{path.name}: unknown section %{current}")
            if current in d.sections:
                raise ValueError(f"{path.name}: section %{current} twice")
            continue
        if re.match(r"^\s+%[A-Za-z]", raw):
            # Apptainer reads an indented %word as a section header too (the build then fails
            # with "invalid section(s) specified").
            raise ValueError(f"{path.name}: indented line starting with '%' reads as a section: {raw.strip()!r}")
        if current is None:
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            if ":" not in s:
                raise ValueError(f"{path.name}: header line without 'Key: value': {raw!r}")
            k, v = s.split(":", 1)
            d.header[k.strip().lower()] = v.strip()
        else:
            body.append(raw)
    if current:
        d.sections[current] = "\n".join(body).strip("\n")
    if "bootstrap" not in d.header:
        raise ValueError(f"{path.name}: no 'Bootstrap:' header")
    # Header values may use build arguments ({{ DEBIAN_MIRROR }}): check what a plain
    # `apptainer build` uses, i.e. the %arguments defaults.
    args = d.arguments()
    for k, v in d.header.items():
        try:
            d.header[k] = substitute(v, args)
        except KeyError as e:
            raise ValueError(f"{path.name}: header {k} uses {{{{ {e.args[0]} }}}} without a %arguments default") from None
    return d


def substitute(text: str, args: dict[str, str]) -> str:
    """``{{ NAME }}`` build arguments replaced as ``apptainer build`` does (KeyError: no value)."""
    return re.sub(r"{{\s*(\w+)\s*}}", lambda m: args[m.group(1)], text)


def read_pins(path: Path) -> tuple[dict[str, str], list[str]]:
    """(``{normalised name: version}`` for ``==`` lines, lines that are not exact pins)."""
    pins: dict[str, str] = {}
    loose: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = PIN_RE.match(line.split(";", 1)[0].strip())
        if m:
            pins[norm(m.group(1))] = m.group(3)
        else:
            loose.append(line)
    return pins, loose


def _pip_install_args(post: str) -> list[list[str]]:
    """Argument lists of every ``pip install`` in a %post (line continuations joined)."""
    text = re.sub(r"\\\n", " ", post)
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0]
        m = re.search(r"\bpip3?\s+install\b(.*)", line)
        if m:
            out.append(shlex.split(m.group(1)))
    return out


def python_incompatible(pins: dict[str, str], python: str) -> list[str]:
    """Pins whose Requires-Python rejects ``python``, judged from the installed distribution's
    metadata (pins not installed at that exact version here are not judged)."""
    from importlib import metadata

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    bad: list[str] = []
    for name, ver in sorted(pins.items()):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != ver:
            continue
        rp = dist.metadata.get("Requires-Python")
        try:
            ok = not rp or SpecifierSet(rp).contains(python, prereleases=True)
        except InvalidSpecifier:
            continue
        if not ok:
            bad.append(f"{name}=={ver} (Requires-Python {rp})")
    return bad


def check_definition(d: Definition, lock: dict[str, str], defs: dict[str, Definition]) -> list[str]:
    errs: list[str] = []
    n = d.path.name
    for s in REQUIRED_SECTIONS:
        if not d.sections.get(s, "").strip():
            errs.append(f"{n}: missing or empty %{s}")
    # ---- pinned base
    boot = d.header["bootstrap"].lower()
    if boot in ("docker", "oras", "library", "docker-daemon"):
        if not DIGEST_RE.search(d.header.get("from", "")):
            errs.append(
                f"{n}: Bootstrap {boot} From must be pinned by @sha256 digest: {d.header.get('from')!r}"
            )
    elif boot == "debootstrap":
        if not d.header.get("osversion"):
            errs.append(f"{n}: debootstrap without OSVersion")
        if not SNAPSHOT_RE.match(d.header.get("mirrorurl", "")):
            errs.append(
                f"{n}: debootstrap MirrorURL must be a snapshot.debian.org timestamp, got "
                f"{d.header.get('mirrorurl')!r} (a plain mirror drifts with every point release)"
            )
    elif boot == "localimage":
        src = d.header.get("from", "")
        base = Path(src)
        if base.parent.as_posix() != "containers" or base.suffix != ".sif" or base.stem not in defs:
            errs.append(
                f"{n}: localimage must build on containers/<name>.sif from a definition here, got {src!r}"
            )
        elif base.stem == d.name:
            errs.append(f"{n}: localimage on itself")
    else:
        errs.append(f"{n}: Bootstrap {boot!r} cannot be pinned; use debootstrap, docker@sha256 or localimage")
    # ---- %files
    copied = {}
    for src, dst in d.files():
        if not (REPO / src).exists():
            errs.append(f"{n}: %files source {src} does not exist")
        copied[dst] = src
    # ---- pip pins in %post
    req_pins: dict[str, str] = {}
    for args in _pip_install_args(d.sections.get("post", "")):
        loose_here: list[tuple[str, str]] = []
        constraints: dict[str, str] = {}
        i = 0
        while i < len(args):
            a = args[i]
            if a in ("-r", "--requirement", "-c", "--constraint"):
                target = args[i + 1] if i + 1 < len(args) else ""
                src = copied.get(target)
                if src is None:
                    errs.append(f"{n}: pip {a} {target}: file not copied in by %files")
                else:
                    pins, loose = read_pins(REPO / src)
                    if a in ("-c", "--constraint"):
                        constraints.update(pins)
                    else:
                        req_pins.update(pins)
                        loose_here += [(src, line) for line in loose]
                i += 2
                continue
            if a.startswith(("-", "$", "/", ".")):
                i += 1
                continue
            m = PIN_RE.match(a)
            if not m:
                errs.append(f"{n}: unpinned pip install {a!r} in %post")
            else:
                name, ver = norm(m.group(1)), m.group(3)
                want = lock.get(name)
                if want is not None and want != ver:
                    errs.append(f"{n}: %post pins {m.group(1)}=={ver} but requirements/lock.txt has {want}")
            i += 1
        # A range in a requirement file is fine when a constraint file of the same install pins it.
        for src, line in loose_here:
            pkg = norm(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0])
            if pkg in constraints:
                req_pins[pkg] = constraints[pkg]
            else:
                errs.append(f"{n}: {src} does not pin {line!r} and no -c constraint does (images need ==)")
        for pkg, ver in constraints.items():
            if lock.get(pkg) not in (None, ver):
                errs.append(f"{n}: constraint {pkg}=={ver} differs from requirements/lock.txt {lock[pkg]}")
    # Packages the image pins both in its own requirement file and in the lock: report drift only
    # where the lock is what the image installs (base stack); vllm.txt diverges on purpose.
    if "requirements/lock.txt" in copied.values():
        for name, ver in req_pins.items():
            if lock.get(name) not in (None, ver):
                errs.append(f"{n}: {name}=={ver} differs from lock {lock[name]}")
    # ---- the image's python3 can install every pin
    if boot == "debootstrap":
        release = d.header.get("osversion", "").lower()
        py = DEBIAN_PYTHON.get(release)
        if py is None:
            errs.append(f"{n}: unknown Debian release {release!r}: add its python3 version to DEBIAN_PYTHON")
        else:
            bad = python_incompatible(req_pins, py)
            if bad:
                errs.append(
                    f"{n}: Debian {release}'s python3 is {py}; these pins do not support it: {', '.join(bad)}"
                )
    # ---- mmcv version vs build script
    if "build_mmcv.sh" in d.sections.get("post", ""):
        m = re.search(r"MMCV_VERSION:-([0-9.]+)", (REPO / "scripts/setup/build_mmcv.sh").read_text())
        want = d.arguments().get("MMCV_VERSION")
        if m and want and want != m.group(1):
            errs.append(f"{n}: MMCV_VERSION {want} != build_mmcv.sh default {m.group(1)}")
    # ---- %test asserts the version its requirement file pins (e.g. vllm == "0.33.0")
    for pkg, ver in re.findall(r'md\.version\("([^"]+)"\).*?==\s*"([^"]+)"', d.sections.get("test", "")):
        if req_pins.get(norm(pkg)) not in (None, ver):
            errs.append(f"{n}: %test expects {pkg} {ver} but the image installs {req_pins[norm(pkg)]}")
    return errs


def load_defs() -> dict[str, Definition]:
    return {p.stem: parse_def(p) for p in sorted(CONTAINERS.glob("*.def"))}


def check_all() -> list[str]:
    errs: list[str] = []
    try:
        defs = load_defs()
    except ValueError as e:
        return [str(e)]
    if not defs:
        return ["no containers/*.def"]
    lock, _ = read_pins(LOCK)
    for d in defs.values():
        errs += check_definition(d, lock, defs)
    return errs


def image_is_pinned(img: str, defs: dict[str, Definition]) -> bool:
    if DIGEST_RE.search(img):
        return True
    p = Path(img.removeprefix("file://"))
    return p.suffix == ".sif" and p.parent.name == "containers" and p.stem in defs


def rule_settings(configfiles: list[str]) -> dict[str, dict[str, object]]:
    """{rule: {container, conda, resources}}, from the workflow as Snakemake loads it."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    cwd = os.getcwd()
    try:
        os.chdir(REPO)
        with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
            wf = api.workflow(
                resource_settings=ResourceSettings(),
                config_settings=ConfigSettings(configfiles=[Path(c) for c in configfiles]),
                snakefile=REPO / "Snakefile",
                workdir=REPO,
            )
            w = wf._workflow
            glob = getattr(w, "global_container_img", None)
            return {
                r.name: {
                    "container": r.container_img or glob,
                    "conda": str(r.conda_env) if r.conda_env else None,
                    "resources": {k: v for k, v in r.resources.items() if not callable(v)},
                }
                for r in w.rules
                if r.name != "all"
            }
    finally:
        os.chdir(cwd)


def rule_containers(configfiles: list[str]) -> dict[str, str | None]:
    """{rule: container image or None}, from the workflow as Snakemake loads it."""
    return {name: s["container"] for name, s in rule_settings(configfiles).items()}  # type: ignore[misc]


def check_rules(configfiles: list[str]) -> list[str]:
    defs = load_defs()
    errs = []
    for rule, img in sorted(rule_containers(configfiles).items()):
        if not img:
            errs.append(f"rule {rule}: no container:")
        elif not image_is_pinned(str(img), defs):
            errs.append(f"rule {rule}: container {img!r} is neither a digest nor containers/<def>.sif")
    return errs


# ------------------------------------------------------------------------------------ run %post
def _reachable(url: str, timeout: float = 10) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/dists/bookworm/Release", timeout=timeout) as r:
            return r.status == 200
    except Exception:
        return False


def run_post(name: str, mirror: str | None = None, keep: bool = False) -> int:
    """debootstrap NAME.def's base, copy its %files, run its %post with pip in dry-run mode."""
    d = parse_def(CONTAINERS / f"{name}.def")
    if d.header["bootstrap"].lower() != "debootstrap":
        print(f"{name}.def does not bootstrap from Debian; nothing to run", file=sys.stderr)
        return 2
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        print("needs root and debootstrap", file=sys.stderr)
        return 2
    mirror = mirror or d.header["mirrorurl"]
    if not _reachable(mirror):
        print(
            f"pinned mirror {mirror} unreachable here; using {FALLBACK_MIRROR} (same suite)", file=sys.stderr
        )
        mirror = FALLBACK_MIRROR
        if not _reachable(mirror):
            print("no Debian mirror reachable", file=sys.stderr)
            return 2
    root = Path(tempfile.mkdtemp(prefix=f"pmcflow-{name}-root-"))
    mounts: list[Path] = []
    try:
        cmd = ["debootstrap", "--variant=minbase"]
        if d.header.get("include"):
            cmd.append("--include=" + d.header["include"].replace(" ", ""))
        cmd += [d.header["osversion"], str(root), mirror]
        print("+", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        # The archive the definition pins, not the fallback, is what apt must use inside.
        (root / "etc/apt/sources.list").write_text(f"deb {mirror} {d.header['osversion']} main\n")
        shutil.copy2("/etc/resolv.conf", root / "etc/resolv.conf")
        for src, dst in d.files():
            target = root / dst.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if (REPO / src).is_dir():
                shutil.copytree(REPO / src, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(REPO / src, target)
        for fs, where in (("proc", "proc"), ("devtmpfs", "dev")):
            mp = root / where
            subprocess.run(["mount", "-t", fs, fs, str(mp)], check=True)
            mounts.append(mp)
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "LC_ALL": "C.UTF-8",
            "PMCFLOW_PIP_DRY_RUN": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        # Trust what the host trusts: behind a TLS-intercepting proxy (as on many clusters and on
        # this project's build machines) the root's stock CA bundle cannot verify the registry.
        host_ca = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
        if Path(host_ca).is_file():
            shutil.copy2(host_ca, root / "tmp/host-ca.crt")
            env["PIP_CERT"] = env["REQUESTS_CA_BUNDLE"] = "/tmp/host-ca.crt"
        script = root / "tmp/post.sh"
        args = {**d.arguments(), "DEBIAN_MIRROR": mirror, "PIP_CERT": env.get("PIP_CERT", "")}
        post = substitute(d.sections["post"], args)
        script.write_text("#!/bin/sh\n" + post + "\n")
        script.chmod(0o755)
        print(f"+ chroot {root} /tmp/post.sh  (%post of {name}.def, pip dry run)", file=sys.stderr)
        proc = subprocess.run(["chroot", str(root), "/tmp/post.sh"], env=env)
        return proc.returncode
    finally:
        for mp in reversed(mounts):
            subprocess.run(["umount", "-l", str(mp)], check=False)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rules", action="store_true", help="also check every rule has a pinned container:")
    ap.add_argument("--configfile", action="append", default=[], help="config for --rules")
    ap.add_argument("--run-post", metavar="NAME", help="run containers/NAME.def's %%post in debootstrap")
    ap.add_argument("--mirror", help="Debian mirror for --run-post (default: the definition's)")
    ap.add_argument("--keep", action="store_true", help="keep the --run-post root filesystem")
    args = ap.parse_args(argv)
    if args.run_post:
        return run_post(args.run_post, args.mirror, args.keep)
    errs = check_all()
    if args.rules:
        errs += check_rules(args.configfile)
    for e in errs:
        print("FAIL", e)
    if not errs:
        print(f"containers OK: {', '.join(sorted(load_defs()))}")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
