"""Progress bars for the long loops, that stay out of logs and stdout.

:func:`progress` wraps an iterable; :class:`Progress` is the same as a context manager for loops
that advance by batches (``bar.update(n)``).  A tqdm bar is drawn on stderr only when all of:

* ``PMCFLOW_PROGRESS`` is not ``0`` (``1`` draws it even when stderr is not a terminal: tests, or
  ``2>&1 | tee``);
* stderr is a terminal (a Snakemake rule's stderr is its log file: never a bar there);
* logging is not quiet: the ``pmcflow`` logger passes INFO (``pmcflow -q`` sets WARNING);
* tqdm can be imported (a core dependency; without it the loops run unchanged, with no bar).

The bar never writes to stdout, is cleared when the loop ends (``leave=False``), and (unless
forced) waits a second before it appears, so short loops draw nothing.  While it is drawn, log records sent to the console
are printed above it instead of through it.  Nothing else changes: items are yielded as they come,
in order, one at a time (a generator is not read ahead), so a stage's outputs are the same bytes
with or without a bar.

When a loop finishes, one INFO line goes to the ``pmcflow.progress`` logger (so to a rule's log):
``<desc>: <n> <unit>s in <t> s (<rate>)``.  Pass ``summary=False`` where the stage already logs
its counts; :meth:`Progress.timing` gives the elapsed time and rate to add to such a line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["ENV", "Progress", "bars_enabled", "echo", "progress"]

log = logging.getLogger(__name__)

ENV = "PMCFLOW_PROGRESS"
_OFF = {"0", "false", "no", "off"}
_ON = {"1", "true", "yes", "on", "force"}
DELAY_S = 1.0  # a bar appears only once its loop has run this long (unless forced)

T = TypeVar("T")
_drawn: list[Any] = []  # the bars on screen now (innermost last)


def _tqdm_class() -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # an environment without tqdm: no bar, the loop runs the same
        return None
    return tqdm


def _forced() -> bool:
    return os.environ.get(ENV, "").strip().lower() in _ON


def bars_enabled() -> bool:
    """Whether a progress bar would be drawn now (see the module docstring)."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in _OFF:
        return False
    if not logging.getLogger("pmcflow").isEnabledFor(logging.INFO):  # -q, or logging left at WARNING
        return False
    if setting not in _ON:
        stream = sys.stderr
        try:
            if stream is None or not stream.isatty():
                return False
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            return False
    return _tqdm_class() is not None


def _plural(unit: str, n: float) -> str:
    return unit if n == 1 or unit.endswith("s") else f"{unit}s"


def _rate(n: float, elapsed: float, unit: str) -> str:
    if n <= 0 or elapsed <= 0:
        return ""
    per_s = n / elapsed
    return f"{per_s:.1f} {unit}/s" if per_s >= 1 else f"{elapsed / n:.1f} s/{unit}"


def echo(message: str) -> None:
    """Print one line on stderr, above the bar if one is drawn (a plain ``print`` would cut it)."""
    if _drawn:
        _drawn[-1].write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr)


class _ConsoleToBar(logging.Handler):
    """Stands in for a console handler while a bar is drawn: the same level, filters and format,
    written with ``tqdm.write`` (which clears the bar, prints the line, and redraws the bar)."""

    def __init__(self, handler: logging.StreamHandler[Any], tqdm: Any) -> None:
        super().__init__(handler.level)
        self.handler, self.tqdm = handler, tqdm
        self.filters = list(handler.filters)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.tqdm.write(self.handler.format(record), file=self.handler.stream)
            self.handler.flush()
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - logging must never break the loop
            self.handleError(record)


@contextlib.contextmanager
def _console_logging_above(tqdm: Any) -> Iterator[None]:
    """Route the root logger's console handlers (stderr/stdout) through ``tqdm.write``; file
    handlers, and loggers without a console handler, are left alone."""
    root = logging.getLogger()
    before = list(root.handlers)
    swapped = [
        _ConsoleToBar(h, tqdm)
        if isinstance(h, logging.StreamHandler) and h.stream in (sys.stderr, sys.stdout)
        else h
        for h in before
    ]
    root.handlers = swapped
    try:
        yield
    finally:
        if root.handlers == swapped:  # someone reconfigured logging inside the loop: keep theirs
            root.handlers = before


class Progress:
    """A progress bar (when :func:`bars_enabled`) and a timer for one loop.

    ``with Progress(total=len(items), desc="decompose c000001", unit="graphic") as bar:`` and
    ``bar.update(k)`` after each batch.  On a clean exit, logs the INFO summary line unless
    ``summary=False``; after an exception it logs nothing.
    """

    def __init__(
        self, total: int | None = None, *, desc: str, unit: str = "item", summary: bool = True
    ) -> None:
        self.total, self.desc, self.unit, self.summary = total, desc, unit, summary
        self.n = 0
        self._t0: float | None = None
        self._t1: float | None = None
        self._bar: Any = None
        self._redirect: contextlib.ExitStack | None = None

    @property
    def shown(self) -> bool:
        """Whether a bar is drawn (periodic log lines are then redundant)."""
        return self._bar is not None

    @property
    def elapsed(self) -> float:
        if self._t0 is None:
            return 0.0
        return (self._t1 if self._t1 is not None else time.perf_counter()) - self._t0

    def timing(self) -> str:
        """``"12.3 s, 45.6 article/s"``: for a stage's own count line when ``summary=False``."""
        rate = _rate(self.n, self.elapsed, self.unit)
        return f"{self.elapsed:.1f} s" + (f", {rate}" if rate else "")

    def summary_line(self) -> str:
        rate = _rate(self.n, self.elapsed, self.unit)
        return f"{self.desc}: {self.n} {_plural(self.unit, self.n)} in {self.elapsed:.1f} s" + (
            f" ({rate})" if rate else ""
        )

    def __enter__(self) -> Progress:
        self._t0, self._t1, self.n = time.perf_counter(), None, 0
        if bars_enabled():
            tqdm = _tqdm_class()
            self._bar = tqdm(
                total=self.total,
                desc=self.desc,
                unit=self.unit,
                file=sys.stderr,
                leave=False,
                dynamic_ncols=True,
                delay=0.0 if _forced() else DELAY_S,
            )
            _drawn.append(self._bar)
            self._redirect = contextlib.ExitStack()
            self._redirect.enter_context(_console_logging_above(tqdm))
        return self

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._t1 is None:
            self._t1 = time.perf_counter()
        if self._redirect is not None:
            self._redirect.close()
            self._redirect = None
        if self._bar is not None:
            if self._bar in _drawn:
                _drawn.remove(self._bar)
            self._bar.close()
            self._bar = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc_type is None and self.summary:
            log.info("%s", self.summary_line())


def progress(
    iterable: Iterable[T],
    *,
    total: int | None = None,
    desc: str,
    unit: str = "item",
    summary: bool = True,
) -> Iterator[T]:
    """Yield the items of ``iterable`` unchanged, drawing a bar while it runs (see the module
    docstring).  ``total`` defaults to ``len(iterable)`` when it has one.  The summary line is
    logged only when the loop runs to its end (not after ``break`` or an exception)."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:  # a generator: a bar that counts, without a percentage
            total = None
    return _iterate(iterable, total, desc, unit, summary)


def _iterate(iterable: Iterable[T], total: int | None, desc: str, unit: str, summary: bool) -> Iterator[T]:
    with Progress(total, desc=desc, unit=unit, summary=summary) as bar:
        for item in iterable:
            yield item
            bar.update()
