"""Acquire PMC Open Access articles: PMC Cloud, legacy FTP packages, or a local mirror.

Modules: :mod:`.stage` (the Snakemake-facing functions), :mod:`.http` (rate-limited, retrying,
resumable, verified downloads), :mod:`.transport` (HTTP vs local files), :mod:`.cloud` and
:mod:`.ftp` (the two layouts), :mod:`.select` (licence / retraction / date selection),
:mod:`.media` (image checks), :mod:`.mockserver` (loopback test server), :mod:`.layout` (writers of
source trees for tests, benchmarks and mirrors).
"""
