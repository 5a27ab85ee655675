"""`python -m core`: train runs, list them and export their metrics from a terminal.

    python -m core train --optimizer projected_gd --radius 5 --lr 0.1 --epochs 2
    python -m core runs [--json]
    python -m core export RUN_ID --csv run.csv --tensorboard tb/
    python -m core sweep --param learning_rate=1e-4:1e-1:log --trials 20 --epochs 2

The package: `parser` (assembles the commands' parsers), a module per group of commands,
each command's parser beside its handler (`training`: train, lr-find, resume, fork;
`sweeping`: sweep and its table of trials; `stored`: delete, runs, export; `listing`:
catalog; `steering`: stop, pause, set; `serving`: serve; `presenting`: present, the
dashboard served to a room; `playground`: an optimizer on a 2-D surface), `flags` (the
run flags, made from the run fields and the knobs, and the `RunConfig` they give),
`opening` (the store and engine a command opens), `progress` (the bar and the summary),
`workers` (a multi-worker run's place of this process), `exits` (exit statuses), `quiet`
(TensorFlow's native lines kept off the terminal).

Every command that reads or writes runs takes `--store PATH|URL`: a SQLite file or a
`postgresql://` URL (default: `$OPTLAB_STORE`, else `runs/optlab.sqlite`).
`train` has a flag for every run field (`core.engine.FIELDS`) and for every knob of every
registered optimizer, plugins included, with the knob's help and range; values are checked
by the same validation as the dashboard's, which names each bad field.

Exit status (`EXIT_*`):
    0    done; for `train`, the run completed; for `sweep`, its budget is spent
    1    the run diverged or failed (for `sweep`: it failed, or no trial completed), or
         the store failed while in use
    2    bad input: a bad flag or config, a missing or malformed `--config` file, an
         unknown run, an output path that cannot be written, no store or a corrupt one;
         `train` has then written nothing (no store file, no run), and `runs` and
         `export` never create a store
    130  interrupted by Ctrl-C; `train` first stops its run (status `stopped`)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from core import data, models, optimizers
from core.cli.exits import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    report,
)
from core.cli.flags import run_config
from core.cli.parser import build_parser, needs_plugins
from core.cli.progress import ProgressBar, format_summary, render_progress
from core.cli.quiet import import_tensorflow_quietly
from core.cli.stored import format_runs, run_json
from core.knobs import InvalidInput
from core.optimizers import optimizer_catalog
from core.store import StoreError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ProgressBar",
    "UsageError",
    "build_parser",
    "format_runs",
    "format_summary",
    "main",
    "render_progress",
    "run_config",
    "run_json",
]


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line on `argv` (default: `sys.argv[1:]`); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    plugins = needs_plugins(argv)
    if plugins:
        # Loading plugins imports TensorFlow; without them a training command imports it
        # once its input is checked (`open_engine`).
        import_tensorflow_quietly()
        specs = optimizers.specs()
        errors = optimizer_catalog.plugin_errors() | models.model_catalog.PLUGINS.errors()
        for path, reason in (errors | data.dataset_catalog.PLUGINS.errors()).items():
            print(f"warning: plugin {path} was not loaded: {reason}", file=sys.stderr)
    else:
        specs = list(optimizer_catalog.BUILTIN)
    parser = build_parser(specs, plugins=plugins)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the help, or the usage and the error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.handler(args)
    except (UsageError, InvalidInput) as exc:
        report(str(exc).replace("\n", " "))
        return EXIT_USAGE
    except StoreError as exc:
        report(str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader left (`runs --json | head`): nothing more to say, and no traceback.
        # Python would still try to flush stdout at exit: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
