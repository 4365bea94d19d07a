"""Build the embedded demo corpus: real JATS articles + composed figure images, in both PMC layouts.

Input: the real article XML files in ``demo/sources/jats`` (copied from public repositories with
their provenance in that directory's README).  For every ``<fig>`` the same compositor that
renders detector training data (:mod:`pmcflow.synth.compose`) draws a compound image whose panel
count and labels match the caption's panel letters; table graphics get an image of the table.
Output (``--out``, default ``demo/corpus``):

``pmc-cloud/``  the 2026 PMC Cloud bucket layout (``PMC<id>.<v>/...``, ``metadata/...``, an S3
                inventory report and ``README.txt``);
``pmc-ftp/``    the legacy FTP layout for a subset (``oa_file_list.csv`` + ``oa_package`` tarballs).

Everything is byte-reproducible: fixed seeds, fixed dates, sorted tar members, gzip mtime 0,
JPEG/JSON/CSV written with fixed options.  Synthetic parts (PMCIDs for eLife's own XML, the
retraction flag, the second version of one article, dates) are listed in ``demo/README.md``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import re
import shutil
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree
from PIL import Image, ImageDraw

from pmcflow.seeding import rng_for
from pmcflow.synth import labels as L
from pmcflow.synth.compose import FigureParams, compose, sample_figure
from pmcflow.synth.sources import SourcePool, builtin_pool
from pmcflow.tables import temp_sibling

XLINK = "{http://www.w3.org/1999/xlink}href"
BUCKET = "pmc-oa-opendata"
SYNTHETIC_PMCID_BASE = 99990001
DEFAULT_SEED = 20260415
LONG_SIDE = 640
JPEG_QUALITY = 85

# Synthetic choices (documented in demo/README.md).  Keys are source file names.
TWO_VERSIONS = "1471-2180-11-174.nxml"  # gets v1 and v2 in the cloud layout
RETRACTED = "PMC2775662.xml"  # is_retracted "yes" in its metadata (a synthetic flag)
FTP_SUBSET = ("1471-2180-11-174.nxml", "ehp-116-1694.nxml", "elife-02833-v2.xml", "pone.0046493.nxml")
# Fixed "last modified" times; article k of the sorted list is modified k hours after BASE.
BASE_DAY = "2026-04-14"
INVENTORY_DATE = "2026-04-15T01-00Z"
INVENTORY_CREATED_MS = "1776214800000"  # 2026-04-15T01:00:00Z
TAR_MTIME = 1776124800  # 2026-04-14T00:00:00Z
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


# ----------------------------------------------------------------------------------------------
# reading the articles (small and local on purpose: no dependency on pmcflow.jats)
# ----------------------------------------------------------------------------------------------


def _local(tag: Any) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def _text(el: etree._Element | None) -> str:
    """Whitespace-normalised text of an element; titles, labels and paragraphs are separated."""
    if el is None:
        return ""
    return " ".join("".join(_itertext_blocks(el)).split())


def _itertext_blocks(el: etree._Element) -> list[str]:
    out: list[str] = []

    def walk(node: etree._Element) -> None:
        if _local(node.tag) in {"title", "p", "label", "caption"}:
            out.append(" ")
        if node.text:
            out.append(node.text)
        for child in node:
            if isinstance(child.tag, str):
                walk(child)
            if child.tail:
                out.append(child.tail)

    walk(el)
    return out


def _find(el: etree._Element, path: str) -> etree._Element | None:
    found = el.xpath(path)
    return found[0] if found else None


@dataclass
class FigureInfo:
    fig_id: str
    label: str
    caption: str
    hrefs: list[str]
    kind: str = "fig"  # fig | table
    table_rows: list[list[str]] = field(default_factory=list)


@dataclass
class ArticleInfo:
    source_name: str
    pmcid: str  # PMC<digits>
    pmcid_synthetic: bool
    doi: str | None
    pmid: str | None
    title: str
    citation: str
    license_code: str
    license_url: str | None
    figures: list[FigureInfo]


def _article_root(tree: etree._ElementTree) -> etree._Element:
    root = tree.getroot()
    if _local(root.tag) == "article":
        return root
    found = root.xpath("//*[local-name()='article']")
    if not found:
        raise ValueError("no <article> element")
    return found[0]


def license_code(url: str | None, license_type: str | None, text: str) -> str:
    """PMC-style licence code from a JATS ``<license>`` (URL first, then its text)."""
    probe = (url or "").lower()
    if not probe:
        t = text.lower()
        if "creative commons attribution" in t or "creativecommons.org/licenses/by" in t:
            probe = "licenses/by/"
            if "noncommercial" in t or "non-commercial" in t:
                probe = "licenses/by-nc/"
        elif "publicdomain/zero" in t or "cc0" in t:
            probe = "publicdomain/zero"
    if "publicdomain/zero" in probe:
        return "CC0"
    m = re.search(r"licenses/(by(?:-nc)?(?:-sa|-nd)?)/", probe + "/")
    if m:
        return "CC " + m.group(1).upper()
    return "NO-CC CODE"


def _citation(meta: etree._Element) -> str:
    journal = (
        _find(meta, "../journal-meta/journal-id[@journal-id-type='nlm-ta']/text()")
        or _find(meta, "../journal-meta/journal-id[@journal-id-type='iso-abbrev']/text()")
        or _find(meta, "../journal-meta//journal-title/text()")
        or ""
    )
    date = None
    for t in ("epub", "ppub", "collection", "pub"):
        date = _find(meta, f"pub-date[@pub-type='{t}' or @date-type='{t}']")
        if date is not None:
            break
    if date is None:
        date = _find(meta, "pub-date")
    when = ""
    if date is not None:
        y = date.findtext("year") or ""
        mo = date.findtext("month") or ""
        d = date.findtext("day") or ""
        mon = MONTHS[int(mo) - 1] if mo.isdigit() and 1 <= int(mo) <= 12 else mo
        when = " ".join(x for x in (y, mon, d.lstrip("0")) if x)
    vol = meta.findtext("volume") or ""
    iss = meta.findtext("issue") or ""
    fpage, lpage = meta.findtext("fpage") or "", meta.findtext("lpage") or ""
    pages = (
        f"{fpage}-{lpage}"
        if fpage and lpage and lpage != fpage
        else (fpage or meta.findtext("elocation-id") or "")
    )
    where = vol + (f"({iss})" if iss else "")
    cite = f"{str(journal).strip()}. {when}"
    if where or pages:
        cite += f"; {where}:{pages}" if where else f"; {pages}"
    return cite


def read_article(path: Path) -> tuple[etree._Element, dict[str, Any]]:
    tree = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True))
    art = _article_root(tree)
    meta = _find(art, "./front/article-meta")
    if meta is None:
        raise ValueError(f"{path}: no article-meta")
    ids = {el.get("pub-id-type"): (el.text or "").strip() for el in meta.findall("article-id")}
    lic = _find(meta, ".//license")
    lic_url = lic.get(XLINK) if lic is not None else None
    info = {
        "pmc": ids.get("pmc") or ids.get("pmcid"),
        "doi": ids.get("doi"),
        "pmid": ids.get("pmid"),
        "title": _text(_find(meta, "./title-group/article-title")),
        "citation": _citation(meta),
        "license_url": lic_url,
        "license_code": license_code(
            lic_url, lic.get("license-type") if lic is not None else None, _text(lic)
        ),
    }
    return art, info


def extract_figures(art: etree._Element) -> list[FigureInfo]:
    """Every ``<fig>`` (with its graphics) and every other ``<graphic>`` (tables etc.)."""
    out: list[FigureInfo] = []
    seen: set[str] = set()
    for fig in art.iter("fig"):
        hrefs = [g.get(XLINK) for g in fig.iter("graphic") if g.get(XLINK)]
        cap = fig.find("caption")
        out.append(
            FigureInfo(fig.get("id") or "", _text(fig.find("label")), _text(cap), [h for h in hrefs if h])
        )
        seen.update(h for h in hrefs if h)
    for g in art.iter("graphic"):
        href = g.get(XLINK)
        if not href or href in seen:
            continue
        wrap = next(
            (a for a in g.iterancestors() if a.tag in ("table-wrap", "boxed-text", "disp-formula")), None
        )
        rows: list[list[str]] = []
        if wrap is not None:
            for tr in wrap.iter("tr"):
                rows.append([_text(c) for c in tr if c.tag in ("td", "th")])
        out.append(
            FigureInfo(
                wrap.get("id", "") if wrap is not None else "",
                _text(wrap.find("label")) if wrap is not None else "",
                _text(wrap.find("caption")) if wrap is not None else "",
                [href],
                kind="table",
                table_rows=rows,
            )
        )
        seen.add(href)
    return out


def media_name(href: str) -> str:
    """The media file for a graphic href: PMC serves ``<href>.jpg`` (hrefs carry no extension)."""
    return strip_ext(href) + ".jpg"


def strip_ext(href: str) -> str:
    return re.sub(r"\.(tiff?|jpe?g|png|gif|eps)$", "", href, flags=re.I)


def load_articles(src_dir: Path) -> list[ArticleInfo]:
    files = sorted(p for p in src_dir.iterdir() if p.suffix in (".xml", ".nxml"))
    arts: list[ArticleInfo] = []
    next_synth = SYNTHETIC_PMCID_BASE
    for p in files:
        art, info = read_article(p)
        raw = info["pmc"]
        if raw:
            pmcid, synthetic = "PMC" + re.sub(r"^PMC", "", raw, flags=re.I), False
        else:
            pmcid, synthetic = f"PMC{next_synth}", True
            next_synth += 1
        arts.append(
            ArticleInfo(
                source_name=p.name,
                pmcid=pmcid,
                pmcid_synthetic=synthetic,
                doi=info["doi"],
                pmid=info["pmid"],
                title=info["title"],
                citation=info["citation"],
                license_code=info["license_code"],
                license_url=info["license_url"],
                figures=extract_figures(art),
            )
        )
    return arts


# ----------------------------------------------------------------------------------------------
# the XML as PMC would serve it
# ----------------------------------------------------------------------------------------------

_ARTICLE_ID = re.compile(r"([ \t]*)<article-id\b")
_GRAPHIC_HREF = re.compile(r'(<(?:inline-)?graphic\b[^>]*?xlink:href=")([^"]+)(")')


def ingest_xml(raw: bytes, art: ArticleInfo) -> bytes:
    """The source XML with what PMC's ingest adds: a ``pmc`` article-id, extension-less hrefs.

    Text-level edits only, so everything else stays byte-identical to the source file.
    """
    text = raw.decode("utf-8")
    if art.pmcid_synthetic:
        m = _ARTICLE_ID.search(text)
        if m is None:
            raise ValueError(f"{art.source_name}: no <article-id> to insert the PMCID beside")
        indent = m.group(1)
        digits = art.pmcid[3:]
        sep = "\n" if indent else ""
        text = (
            text[: m.start(1)]
            + f'{indent}<article-id pub-id-type="pmc">{digits}</article-id>{sep}'
            + text[m.start(1) :]
        )
    text = _GRAPHIC_HREF.sub(lambda m: m.group(1) + strip_ext(m.group(2)) + m.group(3), text)
    return text.encode("utf-8")


def plain_text(xml: bytes) -> bytes:
    """A ``.txt`` rendering (title, abstract, body paragraphs) like PMC's text files."""
    tree = etree.parse(io.BytesIO(xml), etree.XMLParser(resolve_entities=False, no_network=True))
    art = _article_root(tree)
    blocks: list[str] = []
    title = _find(art, "./front/article-meta/title-group/article-title")
    if title is not None:
        blocks.append(_text(title))
    for sect in ("./front/article-meta/abstract", "./body"):
        for el in art.xpath(sect):
            for node in el.iter("title", "p"):
                t = " ".join("".join(node.itertext()).split())
                if t:
                    blocks.append(t)
    return ("\n\n".join(blocks) + "\n").encode("utf-8")


# ----------------------------------------------------------------------------------------------
# images
# ----------------------------------------------------------------------------------------------


def jpeg_bytes(im: Image.Image, quality: int = JPEG_QUALITY) -> bytes:
    buf = io.BytesIO()
    im.convert("RGB").save(buf, "JPEG", quality=quality, optimize=True, progressive=False, subsampling=2)
    return buf.getvalue()


def figure_canvas(n: int, rng_u: float, rng_v: float) -> tuple[int, int]:
    """A figure-like canvas: long side :data:`LONG_SIDE`, aspect from the panel count."""
    if n == 1:
        aspect = (4 / 3, 1.0, 3 / 2, 4 / 5)[int(rng_u * 4) % 4]
    else:
        aspect = 1.0 + 0.6 * rng_v if n <= 6 else 0.8 + 0.45 * rng_v
    w, h = (LONG_SIDE, round(LONG_SIDE / aspect)) if aspect >= 1 else (round(LONG_SIDE * aspect), LONG_SIDE)
    return int(w), int(h)


def render_figure(
    pool: SourcePool, seed: int, key: str, caption: str
) -> tuple[Image.Image, list[dict[str, Any]], list[str]]:
    """Compose the image of one figure: panel count and labels from its caption."""
    found = L.caption_panel_labels(caption)
    rng = rng_for(seed, "democorpus", key)
    w, h = figure_canvas(max(1, len(found)), float(rng.random()), float(rng.random()))
    spec, panels = sample_figure(
        rng, pool, w, h, params=FigureParams(), labels=found, n_panels=max(1, len(found))
    )
    im, anns = compose(spec, panels)
    return im, anns, found


def render_table(fig: FigureInfo, width: int = LONG_SIDE) -> Image.Image:
    """An image of a table from its cells (what a PMC table graphic shows)."""
    f = L.font("DejaVuSans", 11)
    fb = L.font("DejaVuSans-Bold", 11)
    rows = [r for r in fig.table_rows if r][:18] or [[fig.caption[:90] or fig.label]]
    ncol = max(len(r) for r in rows)
    line_h = 18
    h = 30 + line_h * len(rows) + 10
    im = Image.new("RGB", (width, h), (255, 255, 255))
    d = ImageDraw.Draw(im)
    d.text((8, 6), (fig.label or "Table")[:80], font=fb, fill=(0, 0, 0))
    col_w = (width - 16) // ncol
    y = 30
    d.line((8, y - 3, width - 8, y - 3), fill=(0, 0, 0))
    for i, r in enumerate(rows):
        for j, cell in enumerate(r):
            text = cell
            while text and d.textlength(text, font=f) > col_w - 6:
                text = text[:-1]
            d.text((8 + j * col_w, y), text, font=fb if i == 0 else f, fill=(0, 0, 0))
        y += line_h
        if i == 0:
            d.line((8, y - 2, width - 8, y - 2), fill=(0, 0, 0))
    d.line((8, y + 2, width - 8, y + 2), fill=(0, 0, 0))
    return im


# ----------------------------------------------------------------------------------------------
# writing the layouts
# ----------------------------------------------------------------------------------------------


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


class Tree:
    """Files to write under one root, kept in memory until :meth:`write` (sorted, deterministic)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        if key in self.files and self.files[key] != data:
            raise ValueError(f"two different contents for {key}")
        self.files[key] = data

    def write(self, root: Path) -> None:
        for key in sorted(self.files):
            p = root / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(self.files[key])


def _modified(k: int, version: int) -> str:
    return f"{BASE_DAY}T{(k + version) % 24:02d}:00:00.000Z"


def _last_updated(k: int, version: int) -> str:
    return f"{BASE_DAY} {(k + version) % 24:02d}:00:00"


@dataclass
class BuiltArticle:
    info: ArticleInfo
    version: int
    xml: bytes
    media: dict[str, bytes]  # file name -> bytes
    figures: list[dict[str, Any]]  # figure_id, href, media, labels, boxes


def build_article(
    pool: SourcePool, seed: int, info: ArticleInfo, raw_xml: bytes, version: int
) -> BuiltArticle:
    xml = ingest_xml(raw_xml, info)
    media: dict[str, bytes] = {}
    figs: list[dict[str, Any]] = []
    for fig in info.figures:
        for href in fig.hrefs:
            name = media_name(href)
            if fig.kind == "table":
                im = render_table(fig)
                anns: list[dict[str, Any]] = []
                found: list[str] = []
            else:
                im, anns, found = render_figure(
                    pool, seed, f"{info.pmcid}.{version}/{strip_ext(href)}", fig.caption
                )
            media[name] = jpeg_bytes(im)
            figs.append(
                {
                    "figure_id": fig.fig_id,
                    "kind": fig.kind,
                    "label": fig.label,
                    "href": strip_ext(href),
                    "media": name,
                    "width": im.width,
                    "height": im.height,
                    "caption_panel_labels": found,
                    "panels": [
                        {
                            "bbox": a["bbox"],
                            "label": a["label"],
                            "label_bbox": a["label_bbox"],
                            "modality": a["modality"],
                            "source_id": a["source_id"],
                        }
                        for a in anns
                    ],
                }
            )
    return BuiltArticle(info, version, xml, media, figs)


def cloud_metadata(b: BuiltArticle, text: bytes) -> dict[str, Any]:
    prefix = f"{b.info.pmcid}.{b.version}"

    def url(name: str, data: bytes) -> str:
        return f"s3://{BUCKET}/{prefix}/{name}?md5={md5_hex(data)}"

    return {
        "pmcid": b.info.pmcid,
        "version": b.version,
        "title": b.info.title,
        "citation": b.info.citation,
        "doi": b.info.doi,
        "pmid": b.info.pmid,
        "mid": None,
        "license_code": b.info.license_code,
        "is_pmc_openaccess": "yes",
        "is_retracted": "yes" if b.info.source_name == RETRACTED else "no",
        "is_manuscript": "no",
        "is_historical_ocr": "no",
        "pdf_url": None,
        "xml_url": url(f"{prefix}.xml", b.xml),
        "text_url": url(f"{prefix}.txt", text),
        "media_urls": [url(n, d) for n, d in sorted(b.media.items())],
    }


def write_cloud(tree: Tree, built: Sequence[tuple[int, BuiltArticle]]) -> None:
    mtimes: dict[str, str] = {}
    for k, b in built:
        prefix = f"{b.info.pmcid}.{b.version}"
        text = plain_text(b.xml)
        meta_bytes = _json_bytes(cloud_metadata(b, text))
        objs = {
            f"{prefix}/{prefix}.xml": b.xml,
            f"{prefix}/{prefix}.txt": text,
            f"{prefix}/{prefix}.json": meta_bytes,
        }
        objs.update({f"{prefix}/{n}": d for n, d in b.media.items()})
        objs[f"metadata/{prefix}.json"] = meta_bytes
        for key, data in objs.items():
            tree.put(key, data)
            mtimes[key] = _modified(k, b.version)
    readme = (
        b"pmcflow demo mirror of the PMC Article Datasets bucket (s3://pmc-oa-opendata) layout.\n"
        b"NOT NCBI data: real article XML (see demo/README.md for sources and licences) with figure\n"
        b"images composed by pmcflow from public-domain/openly licensed single-panel images.\n"
        b"Synthetic: PMCIDs >= PMC99990001, the v2 of one article, one is_retracted flag, all dates.\n"
    )
    tree.put("README.txt", readme)
    mtimes["README.txt"] = f"{BASE_DAY}T00:00:00.000Z"
    # S3 Inventory report (CSV, no header, every field quoted; schema in the manifest)
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for key in sorted(tree.files):
        data = tree.files[key]
        w.writerow([BUCKET, key, len(data), mtimes[key], md5_hex(data)])
    gz = gzip_bytes(buf.getvalue().encode("utf-8"))
    data_key = f"inventory-reports/{BUCKET}/metadata/data/{_uuid_from(gz)}.csv.gz"
    manifest = {
        "sourceBucket": BUCKET,
        "destinationBucket": f"arn:aws:s3:::{BUCKET}",
        "version": "2016-11-30",
        "creationTimestamp": INVENTORY_CREATED_MS,
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag",
        "files": [{"key": data_key, "size": len(gz), "MD5checksum": md5_hex(gz)}],
    }
    mbytes = _json_bytes(manifest)
    tree.put(data_key, gz)
    tree.put(f"inventory-reports/{BUCKET}/metadata/{INVENTORY_DATE}/manifest.json", mbytes)
    tree.put(
        f"inventory-reports/{BUCKET}/metadata/{INVENTORY_DATE}/manifest.checksum",
        (md5_hex(mbytes) + "\n").encode(),
    )


def _uuid_from(data: bytes) -> str:
    h = md5_hex(data)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gzip_bytes(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return buf.getvalue()


def package_tar(b: BuiltArticle, nxml_name: str) -> bytes:
    """``PMC<id>.tar.gz`` as in ``oa_package``: ``PMC<id>/<name>.nxml`` + images; deterministic."""
    root = b.info.pmcid
    members = {f"{root}/{nxml_name}": b.xml}
    members.update({f"{root}/{n}": d for n, d in b.media.items()})
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        d = tarfile.TarInfo(root)
        d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, TAR_MTIME
        d.uid = d.gid = 0
        d.uname = d.gname = ""
        tar.addfile(d)
        for name in sorted(members):
            data = members[name]
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, TAR_MTIME
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            tar.addfile(ti, io.BytesIO(data))
    return gzip_bytes(raw.getvalue())


def package_path(pmcid: str) -> str:
    h = md5_hex(pmcid.encode())
    return f"oa_package/{h[:2]}/{h[2:4]}/{pmcid}.tar.gz"


def write_ftp(tree: Tree, built: Sequence[tuple[int, BuiltArticle]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["File", "Article Citation", "Accession ID", "Last Updated (YYYY-MM-DD HH:MM:SS)", "PMID", "License"]
    )
    for k, b in sorted(built, key=lambda kb: int(kb[1].info.pmcid[3:])):
        path = package_path(b.info.pmcid)
        tree.put(path, package_tar(b, Path(b.info.source_name).stem + ".nxml"))
        w.writerow(
            [
                path,
                b.info.citation,
                b.info.pmcid,
                _last_updated(k, b.version),
                b.info.pmid or "",
                b.info.license_code,
            ]
        )
    tree.put("oa_file_list.csv", buf.getvalue().encode("utf-8"))


def build(
    src_dir: Path, out_dir: Path, *, seed: int = DEFAULT_SEED, pool: SourcePool | None = None
) -> dict[str, Any]:
    """Build the corpus into ``out_dir`` (replaced atomically); returns a summary."""
    # Without the chart panels (pmcflow.synth.charts): the committed corpus predates them, and the
    # demo's numbers (README) are measured on it.
    pool = pool or builtin_pool(max_side=LONG_SIDE, include_charts=False)
    arts = load_articles(src_dir)
    cloud, ftp = Tree(), Tree()
    cloud_built: list[tuple[int, BuiltArticle]] = []
    ftp_built: list[tuple[int, BuiltArticle]] = []
    figures_index: list[dict[str, Any]] = []
    for k, info in enumerate(arts):
        raw = (src_dir / info.source_name).read_bytes()
        versions = [1, 2] if info.source_name == TWO_VERSIONS else [1]
        for v in versions:
            b = build_article(pool, seed, info, raw, v)
            cloud_built.append((k, b))
            for f in b.figures:
                figures_index.append({"pmcid": info.pmcid, "version": v, **f})
        if info.source_name in FTP_SUBSET:
            ftp_built.append((k, b))  # the newest version
    write_cloud(cloud, cloud_built)
    write_ftp(ftp, ftp_built)
    summary = {
        "seed": seed,
        "articles": [
            {
                "source": a.source_name,
                "pmcid": a.pmcid,
                "pmcid_synthetic": a.pmcid_synthetic,
                "doi": a.doi,
                "license_code": a.license_code,
                "versions": [1, 2] if a.source_name == TWO_VERSIONS else [1],
                "retracted_flag": a.source_name == RETRACTED,
                "in_ftp_subset": a.source_name in FTP_SUBSET,
                "figures": sum(f.kind == "fig" for f in a.figures),
                "graphics": sum(len(f.hrefs) for f in a.figures),
            }
            for a in arts
        ],
        "source_rejections": pool.rejection_rows(),
    }
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(out_dir, directory=True)
    try:
        cloud.write(tmp / "pmc-cloud")
        ftp.write(tmp / "pmc-ftp")
        (tmp / "figures.jsonl").write_bytes(
            "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in figures_index).encode(
                "utf-8"
            )
        )
        (tmp / "build.json").write_bytes(_json_bytes(summary))
        if out_dir.exists():
            if not (out_dir / "build.json").exists() and any(out_dir.iterdir()):
                raise FileExistsError(
                    f"{out_dir} exists and is not a demo corpus (no build.json); not replacing it"
                )
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def import_sources(fixtures: Path, dest: Path) -> list[str]:
    """Copy the article XML files and their README from a fixtures directory (one-time step)."""
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for p in sorted(fixtures.iterdir()):
        if p.suffix in (".xml", ".nxml") or p.name == "README.md":
            shutil.copyfile(p, dest / p.name)
            copied.append(p.name)
    return copied


def cli(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pmcflow build-demo-corpus", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="demo/corpus", help="output directory (replaced)")
    ap.add_argument("--sources", default="demo/sources/jats", help="directory of article XML files")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument(
        "--import-from",
        default=None,
        help="first copy *.xml/*.nxml + README.md from this directory into --sources",
    )
    args = ap.parse_args(list(argv) if argv is not None else None)
    src = Path(args.sources)
    if args.import_from:
        import_sources(Path(args.import_from), src)
    summary = build(src, Path(args.out), seed=args.seed)
    n_media = sum(a["graphics"] for a in summary["articles"])
    print(f"demo corpus: {len(summary['articles'])} articles, {n_media} graphics -> {args.out}")
    return 0
