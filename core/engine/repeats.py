"""Repeats: one config trained over several seeds, its runs one group, so that a
conclusion about it carries its uncertainty (see `core.group_comparison`)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence

from core.engine.status import RunStatus
from core.knobs import InvalidInput
from core.training.config import RunConfig

#: What the seeds of the repeats vary: the initial weights and the batch order, or one.
VARY = ("both", "init", "data")
MAX_REPEATS = 100


def repeat_configs(config: RunConfig, repeats: int, vary: str = "both") -> list[RunConfig]:
    """`repeats` copies of `config` in one new group, the k-th (k = 0 … N−1) with seed
    seed + k for what `vary` names (`init`: the batch order keeps the config's; `data`:
    the initial weights do), each named after its config and seed. Raises `InvalidInput`
    naming `repeats` or `vary`."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput(
            {"repeats": f"must be a whole number in [1, {MAX_REPEATS}] (got {repeats!r})"}
        )
    if vary not in VARY:
        raise InvalidInput({"vary": f"must be one of {', '.join(VARY)} (got {vary!r})"})
    if repeats == 1:
        return [config]
    group = f"g-{secrets.token_hex(3)}"
    name = config.name or config.label
    copies = []
    for k in range(repeats):
        seed = config.seed + (k if vary in {"both", "init"} else 0)
        data_seed = config.batch_seed + (k if vary in {"both", "data"} else 0)
        copies.append(
            config.replace(
                seed=seed,
                data_seed=None if data_seed == seed else data_seed,
                group=group,
                name=f"{name} · seed {seed}" if vary != "data" else f"{name} · data {data_seed}",
            )
        )
    return copies


def groups(runs: Iterable[RunStatus]) -> dict[str, list[RunStatus]]:
    """The runs of each group of repeats, by group, in the order given."""
    found: dict[str, list[RunStatus]] = {}
    for run in runs:
        if group := run.config.get("group"):
            found.setdefault(group, []).append(run)
    return found


def whole_groups(
    run_ids: Iterable[str], found: Mapping[str, Sequence[RunStatus]]
) -> tuple[list[str], list[str]]:
    """The groups of `found` whose every run is among `run_ids` (in `found`'s order), and
    the runs of `run_ids` left over: a group's runs handed over one by one are that group
    again, compared as one."""
    given = list(dict.fromkeys(run_ids))
    whole = [group for group, runs in found.items() if {run.id for run in runs} <= set(given)]
    grouped = {run.id for group in whole for run in found[group]}
    return whole, [run_id for run_id in given if run_id not in grouped]


def group_label(runs: Sequence[RunStatus]) -> str:
    """A group's name: its runs' name without the seed, e.g. `adamw · mlp · digits`."""
    name = runs[0].name
    base, _, last = name.rpartition(" · ")
    return base if base and last.split(" ")[0] in {"seed", "data"} else name
