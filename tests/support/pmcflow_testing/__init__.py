"""Test scaffolding, kept out of the installed package: a throw-away single-node Slurm cluster and
derived profiles (``slurm``), workflow copies and plan parsing (``workflow``), and small synthetic
detector / encoder datasets (``detect_toydata``, ``encoder_toydata``).

Used by the tests (``tests/conftest.py`` puts ``tests/support`` on ``sys.path``) and the benchmarks.
Nothing here runs inside a rule.
"""
