"""The study an analysis reads, from the lab's store, and the trials it counts: the
completed ones, best first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.knobs import InvalidInput
from core.sweep.studies import open_storage, storage_errors, storage_url

if TYPE_CHECKING:
    import optuna

    from core.engine.api import Runs
    from core.store import Store


def load_study(engine: Runs | Store, study_name: str, storage: str | None = None) -> optuna.Study:
    """The study `study_name` of `storage` (default: the store of `engine`, or the store
    itself), opened as `list_studies` opens it. Raises `InvalidInput` naming
    `study_name` if there is none, `StoreError` if the storage fails."""
    import optuna

    url = storage_url(engine, storage)
    with storage_errors(url):
        try:
            return optuna.load_study(study_name=study_name, storage=open_storage(url))
        except KeyError:
            raise InvalidInput({"study_name": f"no study {study_name!r} in the store"}) from None


def completed(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The study's completed trials, best value first (the study's direction says which
    way is best); a study of several objectives has none that rank."""
    if len(study.directions) != 1:
        return []
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    scored = [t for t in trials if t.value is not None]
    maximize = study.direction.name == "MAXIMIZE"
    return sorted(scored, key=lambda t: (-t.value if maximize else t.value, t.number))
