"""Where the store's file lives when the caller does not say."""

import os
from pathlib import Path

#: Environment variable that overrides the default location.
ENV_VAR = "OPTLAB_STORE"

#: The project root: the folder that holds the `core` package.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def default_path() -> Path:
    """`$OPTLAB_STORE` if set and non-empty, else `runs/optlab.sqlite` under the project root."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser()
    return PROJECT_ROOT / "runs" / "optlab.sqlite"
