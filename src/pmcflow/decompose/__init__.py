"""Decompose compound figures into subfigures: boxes, crops, reading order and panel letters.

* :func:`pmcflow.decompose.stage.decompose_chunk` -- the workflow stage (FIGURES -> SUBFIGURES,
  rejections, counts, crops);
* :func:`pmcflow.decompose.cli.cli` -- ``pmcflow decompose --out DIR IMAGE...`` for ad-hoc images;
* :mod:`pmcflow.decompose.order` -- reading order (rows, then columns) and letter assignment;
* :mod:`pmcflow.decompose.labelreader` -- the printed panel-letter reader (torch, scipy);
* :mod:`pmcflow.decompose.lettermerge` -- boxes split off a lettered panel merged into it.

The package imports nothing itself: importing one of its modules (the detector evaluation imports
``lettermerge`` and ``labelreader``) does not import the stage, so editing the stage reruns only the
rules whose code runs it (:mod:`pmcflow.closure`).
"""
