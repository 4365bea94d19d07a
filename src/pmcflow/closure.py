"""What a stage's code reaches: the import closure of a rule script inside ``pmcflow``.

Every rule passes ``code=code_version("scripts/<rule script>.py")`` as a param, so editing any
module the stage's code can reach — or a data file those modules open — reruns that stage and its
descendants, and nothing else. Nothing is listed by hand: the closure is read from the code.

What counts as reached, found statically with :mod:`ast` (no import is executed):

* ``import pmcflow.a.b``, ``from pmcflow.a import b`` and relative imports, at any depth (imports
  inside functions too: they run when the stage does), with every package ``__init__`` on the way;
* dotted module names written as strings (``"pmcflow.detect.yolo"``), as used by registries that
  call :func:`importlib.import_module`;
* data that a module opens by path: runs of string constants in a ``/`` path expression
  (``files("pmcflow") / "data" / "detector"``, ``Path(__file__).parent / "fonts"``) that name an
  existing file or folder under the package root or beside the module.

Standard library only: ``rules/common.smk`` imports it while Snakemake parses the workflow.

Speed: every Snakemake process computes every rule's digest while it parses the workflow (a dry
run, each Slurm job). Parsing the ~130 modules with :mod:`ast` was 3.3 s of a 9-s dry run, so what
a file's source names (imports, dotted strings, path constants) is kept as JSON in
``$PMCFLOW_CACHE_DIR/closure`` (default ``~/.cache/pmcflow``, as the schema cache of
:mod:`pmcflow.config`) under the SHA-256 of the source and of this scanner; it can never be stale.
What those names resolve to (which files and data folders exist) is looked up on every call.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

PACKAGE = "pmcflow"
_DOTTED = re.compile(rf"^{PACKAGE}(\.[A-Za-z_]\w*)+$")
_SKIP_PARTS = {"__pycache__"}
_ANCHOR = re.compile(r"__file__|\bfiles\(")


def _module_files(root: Path, dotted: str) -> list[Path]:
    """Files executed by importing ``dotted`` (``pmcflow.a.b``): each package ``__init__`` on the
    way and the module itself. Empty when the name is not a module under ``root`` (an attribute)."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE:
        return []
    out: list[Path] = [root / "__init__.py"] if (root / "__init__.py").is_file() else []
    here = root
    for i, name in enumerate(parts[1:], start=1):
        pkg = here / name
        if (pkg / "__init__.py").is_file():
            out.append(pkg / "__init__.py")
            here = pkg
        elif (here / f"{name}.py").is_file() and i == len(parts) - 1:
            out.append(here / f"{name}.py")
        else:
            return []
    return out


def _package_of(root: Path, file: Path) -> list[str]:
    """Dotted package parts of the package that holds ``file`` (for relative imports)."""
    rel = file.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    return parts if file.name == "__init__.py" else parts[:-1]


def _path_constants(node: ast.AST) -> list[tuple[str, ...]]:
    """Runs of string constants in a ``a / "x" / "y"`` expression, outermost first."""
    runs: list[tuple[str, ...]] = []
    chain: list[ast.AST] = []
    cur = node
    while isinstance(cur, ast.BinOp) and isinstance(cur.op, ast.Div):
        chain.append(cur.right)
        cur = cur.left
    chain.append(cur)
    chain.reverse()
    run: list[str] = []
    for item in chain:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            run.append(item.value)
        else:
            if run:
                runs.append(tuple(run))
            run = []
    if run:
        runs.append(tuple(run))
    return runs


def _data_path(root: Path, module: Path, run: tuple[str, ...]) -> Path | None:
    """The file or folder that ``run`` names below the package root or beside the module.

    Only the whole run counts: ``"data" / "prompts" / name`` names ``data/prompts``, while a
    prefix that happens to exist (``data``) would pull in every shipped weight."""
    for base in (root, module.parent):
        cand = base.joinpath(*run)
        if not (cand.is_file() or cand.is_dir()) or root not in cand.resolve().parents:
            continue
        # Code is followed through imports; only data (non-package folders, other files) here.
        if cand.is_dir() and (cand / "__init__.py").is_file():
            continue
        if cand.is_file() and cand.suffix == ".py":
            continue
        return cand
    return None


def _source(file: Path) -> bytes:
    """Python source of ``file``; for a notebook, its code cells (magics and shell lines dropped)."""
    if file.suffix != ".ipynb":
        return file.read_bytes()
    import json

    cells = json.loads(file.read_text(encoding="utf-8")).get("cells", [])
    lines: list[str] = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        text = "".join(src) if isinstance(src, list) else str(src)
        lines += [ln for ln in text.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    return "\n".join(lines).encode()


# (level, module or "", imported names) of a relative import
_Relative = tuple[int, str, tuple[str, ...]]


def _scan(source: bytes, filename: str) -> tuple[list[str], list[_Relative], list[tuple[str, ...]]]:
    """What ``source`` names, from its text alone: dotted ``pmcflow`` names (imports, ``from x
    import y`` as both ``x`` and ``x.y``, dotted strings), relative imports, and the runs of string
    constants of each ``/`` path expression anchored at the package (``__file__``, ``files(...)``)."""
    tree = ast.parse(source, filename=filename)
    names: list[str] = []
    relative: list[_Relative] = []
    runs: list[tuple[str, ...]] = []
    inner: set[int] = set()  # the left parts of a `/` chain: only whole chains name a path
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported = tuple(alias.name for alias in node.names)
            if node.level:
                relative.append((node.level, node.module or "", imported))
            else:
                base = node.module or ""
                names += [base] + [f"{base}.{a}" for a in imported]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED.match(node.value):
            names.append(node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left = node.left
            while isinstance(left, ast.BinOp) and isinstance(left.op, ast.Div):
                inner.add(id(left))
                left = left.left
            # Only paths anchored at this package: `Path(__file__)...` or `resources.files(...)`
            # (not `other_package_dir / "data"`).
            if id(node) in inner or not _ANCHOR.search(ast.unparse(left)):
                continue
            runs += _path_constants(node)
    names = [n for n in dict.fromkeys(names) if n.split(".")[0] == PACKAGE]
    return names, relative, list(dict.fromkeys(runs))


def _cache_dir() -> Path:
    """``$PMCFLOW_CACHE_DIR/closure`` (default ``~/.cache/pmcflow/closure``)."""
    return Path(os.environ.get("PMCFLOW_CACHE_DIR") or Path.home() / ".cache" / "pmcflow") / "closure"


@cache
def _scanner_key() -> bytes:
    return hashlib.sha256(Path(__file__).read_bytes()).digest()


def _scan_cached(file: Path) -> tuple[list[str], list[_Relative], list[tuple[str, ...]]]:
    """:func:`_scan` of ``file``, through the on-disk cache (written atomically; where it cannot
    be written, a read-only home in a container, the file is parsed every time)."""
    source = _source(file)
    key = hashlib.sha256(_scanner_key() + source).hexdigest()
    path = _cache_dir() / f"{key}.json"
    try:
        names, relative, runs = json.loads(path.read_bytes())
        return names, [(lv, mod, tuple(imp)) for lv, mod, imp in relative], [tuple(r) for r in runs]
    except (OSError, ValueError, TypeError):
        pass
    found = _scan(source, str(file))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(found), encoding="utf-8")
        os.replace(tmp, path)  # concurrent processes write the same bytes
    except OSError:
        pass
    return found


@cache
def _direct(root: Path, file: Path, mtime_ns: int) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(modules, data paths) that ``file`` reaches directly. Cached per file version."""
    names, relative, runs = _scan_cached(file)
    inside = root in file.resolve().parents
    modules: list[Path] = []
    for name in names:
        modules += _module_files(root, name)
    data: list[Path] = []
    if inside:  # relative imports and data paths count only inside the package
        package = _package_of(root, file)
        for level, module, imported in relative:
            pkg = package[: len(package) - (level - 1)]
            base = ".".join(pkg + ([module] if module else []))
            modules += _module_files(root, base)
            for name in imported:  # `from . import b` where b is a submodule
                modules += _module_files(root, f"{base}.{name}")
        for run in runs:
            hit = _data_path(root, file, run)
            if hit is not None:
                data.append(hit)
    return tuple(dict.fromkeys(modules)), tuple(dict.fromkeys(data))


def _walk_data(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for f in sorted(path.rglob("*")):
        if f.is_file() and not _SKIP_PARTS.intersection(f.parts):
            yield f


def closure(root: str | Path, entries: Iterable[str | Path]) -> list[Path]:
    """Every file under ``root`` (the ``pmcflow`` package folder) that ``entries`` reach.

    ``entries`` are Python files or notebooks (a rule script, a report notebook, a module of the
    package). The entries
    themselves are not returned unless they lie inside ``root``."""
    root = Path(root).resolve()
    seen: set[Path] = set()
    files: set[Path] = set()
    todo = [Path(e).resolve() for e in entries]
    for e in todo:
        if not e.is_file():
            raise FileNotFoundError(f"code closure: no such file {e}")
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        if root in f.parents:
            files.add(f)
        modules, data = _direct(root, f, f.stat().st_mtime_ns)
        todo += [m for m in modules if m not in seen]
        for d in data:
            files.update(_walk_data(d))
    return sorted(files)


def digest(root: str | Path, entries: Iterable[str | Path], length: int = 16) -> str:
    """sha256 over the closure's package-relative names and bytes (``length`` hex digits)."""
    root = Path(root).resolve()
    h = hashlib.sha256()
    for f in closure(root, entries):
        h.update(str(f.relative_to(root)).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:length]
