"""`python -m core`: the command line; see `core.cli`."""

import os
import sys

from core.cli import main

status = main()
if "core.engine.strategies" in sys.modules and sys.modules["core.engine.strategies"].collective():
    # TensorFlow's multi-worker runtime may abort ("terminate called after throwing")
    # while its threads are torn down at exit, once the other workers are gone: the run
    # is stored, so leave without that teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
raise SystemExit(status)
