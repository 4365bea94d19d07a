"""Article selection (``config["select"]``): licence set, retraction, publication-date range.

Dates come from the PMC citation string (``"Breast Cancer Res. 2001 Nov 2; 3(1):55-60"``): the part
before the first ``;`` holds ``YYYY [Mon[-Mon] [D]]``.  A citation gives a date *interval* at its own
precision (``2001`` = the whole year, ``2001 Nov`` = the month); the bounds ``date_from`` /
``date_to`` (``YYYY[-MM[-DD]]``) are intervals too, and an article is in range when its interval
overlaps ``[start of date_from, end of date_to]``.  Last-updated timestamps are *not* used: they
move whenever PMC reprocesses an article.  With a bound set, an article whose date cannot be parsed
is rejected as ``date_unknown``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from pmcflow import licenses
from pmcflow.configcheck import date_bound
from pmcflow.pmc.settings import SelectSettings

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
_CITE_DATE_RE = re.compile(
    r"(?<![\d(:])((?:1[6-9]|20)\d\d)\b"  # year, not a volume(issue) or a page
    r"(?:\s+([A-Za-z]{3})[a-z]*\.?"  # month name (or season, ignored below)
    r"(?:-[A-Za-z]+)?"  # month range "Dec-Jan": start month counts
    r"(?:\s+(\d{1,2})\b(?![:(]))?)?"  # day
)

@dataclass(frozen=True)
class DateSpan:
    start: date
    end: date

    @classmethod
    def of(cls, year: int, month: int | None = None, day: int | None = None) -> DateSpan:
        if month is None:
            return cls(date(year, 1, 1), date(year, 12, 31))
        last = calendar.monthrange(year, month)[1]
        if day is None or not 1 <= day <= last:
            return cls(date(year, month, 1), date(year, month, last))
        return cls(date(year, month, day), date(year, month, day))


def citation_date(citation: str | None) -> DateSpan | None:
    """The publication date interval in a PMC citation, or None."""
    if not citation:
        return None
    head = citation.split(";", 1)[0]
    for m in _CITE_DATE_RE.finditer(head):
        year = int(m.group(1))
        mon = MONTHS.get((m.group(2) or "").lower())
        day = int(m.group(3)) if (mon and m.group(3)) else None
        return DateSpan.of(year, mon, day)
    return None


def parse_bound(text: str) -> DateSpan | None:
    """``YYYY[-MM[-DD]]`` -> the interval it names; empty -> None; anything else -> ValueError."""
    span = date_bound(text)
    return DateSpan(*span) if span else None


@dataclass(frozen=True)
class Selection:
    licenses: frozenset[str] | None  # None = every licence
    include_retracted: bool
    date_from: DateSpan | None
    date_to: DateSpan | None
    max_articles: int  # 0 = no limit

    @classmethod
    def from_config(cls, select: SelectSettings | Mapping[str, Any] | None) -> Selection:
        """From the ``select`` settings (or that section as a mapping, filled from the schema)."""
        s = SelectSettings.from_section(select)
        norm = frozenset(x for x in (licenses.normalise(v) for v in s.licenses) if x)
        return cls(
            licenses=norm or None,
            include_retracted=s.include_retracted,
            date_from=parse_bound(s.date_from),
            date_to=parse_bound(s.date_to),
            max_articles=s.max_articles,
        )

    @property
    def has_date_bounds(self) -> bool:
        return self.date_from is not None or self.date_to is not None

    def check(
        self,
        *,
        license_code: str | None = None,
        is_retracted: bool | None = None,
        citation: str | None = None,
        license_known: bool = True,
        retraction_known: bool = True,
        date_known: bool = True,
    ) -> tuple[str, str] | None:
        """``(reason, detail)`` if the article is not selected, else None.

        A ``*_known=False`` flag skips that check (the value is not available yet, e.g. the
        licence of a cloud article before its metadata is read).
        """
        if license_known and self.licenses is not None:
            norm = licenses.normalise(license_code)
            if norm not in self.licenses:
                return "license_not_selected", f"license {license_code!r} not in {sorted(self.licenses)}"
        if retraction_known and is_retracted and not self.include_retracted:
            return "retracted", "article is marked retracted"
        if date_known and self.has_date_bounds:
            span = citation_date(citation)
            if span is None:
                return "date_unknown", f"no publication date in citation {citation!r}"
            lo = self.date_from.start if self.date_from else date.min
            hi = self.date_to.end if self.date_to else date.max
            if span.end < lo or span.start > hi:
                return "out_of_date_range", f"{span.start.isoformat()}..{span.end.isoformat()} outside {lo}..{hi}"
        return None
