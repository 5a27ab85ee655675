"""`python -m core`: the command line; see `core.cli`."""

import os
import sys

from core.cli import main

status = main()
if "tensorflow" in sys.modules:
    # Whatever the command stored is written and closed by now. Leave without the
    # interpreter's teardown: TensorFlow's C++ code may still run in daemon threads (one
    # letting go of a run's batch iterator, a multi-worker runtime whose peers are gone),
    # and the forced unwind that ends such a thread at exit makes it abort ("terminate
    # called after throwing ...", exit status -6 instead of the command's).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
raise SystemExit(status)
