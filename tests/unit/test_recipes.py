"""Each recipe's verdict on synthetic stored metrics, for both outcomes, and what every
recipe declares. The metrics are written into a temporary store and read back, as a
recipe's runs store theirs."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from itertools import count

import numpy as np
import pytest

from core import data
from core.charts import heatmap_figure
from core.recipes import (
    RECIPES,
    Recipe,
    RunResult,
    Verdict,
    clipping,
    decoupled_weight_decay,
    edge_of_stability,
    large_batch,
    lr_range_test,
    privacy_utility,
    projection,
    warmup,
)
from core.recipes.readings import last_epoch, paired_test
from core.store import Store
from core.training.config import RunConfig

Rows = Mapping[int, Mapping[str, float]]
_ids = count()


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "lab.sqlite") as opened:
        yield opened


def stored(store: Store, rows: Rows, status: str = "completed") -> RunResult:
    """A run whose metrics are `rows` (step → values), ended with `status`."""
    run_id = f"r{next(_ids)}"
    store.create_run(run_id, run_id, {"optimizer": "sgd"})
    with store.metrics_writer(run_id) as writer:
        for step, values in sorted(rows.items()):
            writer.append(step, dict(values))
    store.finish(run_id, status, {"steps": max(rows, default=0)})
    return RunResult(run_id, status, store.read_metrics(run_id))


def finals(**values: float) -> Rows:
    """One logged step holding `values`."""
    return {1: values}


def judged(recipe: Recipe, store: Store, rows: Callable[[str, int], Rows]) -> Verdict:
    """`recipe`'s verdict when run `k` of arm `key` stored `rows(key, k)`."""
    results = {
        arm.key: [stored(store, rows(arm.key, k)) for k in range(arm.repeats)]
        for arm in recipe.arms()
    }
    return recipe.verdict(results)


def test_every_recipe_declares_what_a_card_shows_and_valid_runs() -> None:
    assert list(RECIPES) == [
        "edge_of_stability",
        "large_batch",
        "decoupled_weight_decay",
        "lr_range_test",
        "warmup",
        "clipping",
        "projection",
        "heavy_ball",
        "critical_batch",
        "privacy_utility",
    ]
    for recipe in RECIPES.values():
        assert recipe.claim.endswith(".") and recipe.measure and recipe.charts
        assert recipe.paper.citation and 0 < recipe.runtime_s <= 180
        arms = recipe.arms()
        assert len({arm.key for arm in arms}) == len(arms)
        assert all(isinstance(arm.config, RunConfig) for arm in arms)


def test_declaring_and_judging_import_no_tensorflow() -> None:
    code = "import sys, core.recipes; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("share", "expected"), [(0.95, "yes"), (0.5, "no")])
def test_edge_of_stability(store, share, expected) -> None:
    def rows(key: str, _: int) -> Rows:
        rate = float(key.split("= ")[1])
        plateau = share * 2 / rate
        return {
            step: {"sharpness": min(plateau, 1.0 + step / 10), "loss": 1 / step}
            for step in range(5, 201, 5)
        }

    verdict = judged(edge_of_stability.RECIPE, store, rows)
    assert verdict.reproduced == expected
    assert verdict.numbers["late median ÷ 2/η at η=0.25"] == pytest.approx(share)
    assert verdict.numbers["plateau ratio"] == pytest.approx(2.0)
    lines = edge_of_stability.RECIPE.reference_lines()["sharpness"]
    assert [value for _, value in lines] == [8.0, 4.0]


def test_edge_of_stability_needs_the_two_plateaus_about_2x_apart(store) -> None:
    def rows(key: str, _: int) -> Rows:
        return {step: {"sharpness": 5.0} for step in range(5, 201, 5)}  # 2/η: 8 and 4

    verdict = judged(edge_of_stability.RECIPE, store, rows)
    assert verdict.reproduced == "no" and verdict.numbers["plateau ratio"] == 1.0


@pytest.mark.parametrize(
    ("large", "large_loss", "expected"),
    [(0.8, 6e-4, "yes"), (0.2, 6e-4, "no"), (0.8, 5e-3, "inconclusive")],
)
def test_large_batch(store, large, large_loss, expected) -> None:
    """Sharper at a like training loss says yes; as sharp says no; sharper at a loss 10×
    higher is a comparison of how far training got, and says neither."""

    def rows(key: str, k: int) -> Rows:
        sharpness, loss = (large, large_loss) if key == large_batch.LARGE_KEY else (0.2, 5e-4)
        return finals(**{"sharpness": sharpness + 0.05 * k, "sharpness/loss": loss})

    verdict = judged(large_batch.RECIPE, store, rows)
    assert verdict.reproduced == expected
    spread = 0.05 * (large_batch.SEEDS - 1) / 2  # the mean of 0.05·k over the seeds
    assert verdict.numbers["sharpness, large batch (mean)"] == pytest.approx(large + spread)
    assert verdict.numbers["train loss ratio (large / small)"] == pytest.approx(large_loss / 5e-4)


def test_large_batch_measures_both_arms_on_the_same_examples() -> None:
    """The whole training split, whatever an arm's batch: sharpness on each arm's own
    first batch would compare different data."""
    configs = [arm.config for arm in large_batch.RECIPE.arms()]
    whole_split = data.dataset_catalog.info("digits").train_size
    assert {config.sharpness_examples for config in configs} == {whole_split}
    assert {config.batch_size for config in configs} == {large_batch.SMALL, large_batch.LARGE}


@pytest.mark.parametrize(
    ("moving", "offset", "expected"),
    [("Adam + L2", 1, "yes"), ("AdamW", 1, "no"), ("Adam + L2", 0, "inconclusive")],
)
def test_decoupled_weight_decay(store, moving, offset, expected) -> None:
    # One method's best λ moves a decade a rate (from the grid's edge with offset 0).
    recipe = decoupled_weight_decay.RECIPE
    rates, decays = decoupled_weight_decay.RATES, decoupled_weight_decay.DECAYS

    def rows(key: str, _: int) -> Rows:
        method, rate, decay = key.split(" · ")
        i = [f"η = {r:g}" for r in rates].index(rate)
        j = [f"{d:g}" for d in decays].index(decay.split("= ")[1])
        best = i + offset if method == moving else 2
        return finals(val_loss=0.3 + 0.1 * abs(j - best))

    verdict = judged(recipe, store, rows)
    assert verdict.reproduced == expected
    assert verdict.numbers[f"spread (decades), {moving}"] == pytest.approx(2.0)
    table = recipe.heatmap({}, "AdamW")
    assert table.shape == (len(rates), len(decays)) and np.isnan(table).all()
    # The page's two heatmaps: each method's grid, drawn cell for cell.
    results = {
        arm.key: [stored(store, rows(arm.key, k)) for k in range(arm.repeats)]
        for arm in recipe.arms()
    }
    tables = recipe.tables(results)
    assert list(tables) == ["Adam + L2: final val_loss", "AdamW: final val_loss"]
    grid = tables[f"{moving}: final val_loss"]
    assert grid.values[0, offset] == pytest.approx(0.3)
    assert grid.values[2, offset] == pytest.approx(0.5)
    heat = heatmap_figure("h", "t", grid.values, grid.rows, grid.columns, axes=("η", "λ", "v"))
    (trace,) = heat.data
    assert list(trace.y) == [f"{r:g}" for r in rates] and list(trace.x) == [
        f"{d:g}" for d in decays
    ]
    np.testing.assert_allclose(np.asarray(trace.z, float), grid.values)


def test_decoupled_weight_decay_is_as_sure_as_its_seeds() -> None:
    # AdamW's best λ never moves; Adam + L2's moves a decade at the first rate only when
    # the resampled seeds of one cell happen to favour it: about 4 resamples in 10.
    grid = np.abs(np.arange(len(decoupled_weight_decay.DECAYS)) - 2.0)[None, :, None]
    decoupled = np.broadcast_to(0.3 + 0.1 * grid, (3, 6, 3)).copy()
    coupled = decoupled.copy()
    coupled[0, 3] = [0.25, 0.3, 0.35]  # as good as the best λ, on average
    share = decoupled_weight_decay.smaller_share(decoupled, coupled)
    assert 0.2 < share < 0.6
    assert decoupled_weight_decay.smaller_share(decoupled, decoupled) == 0.0


def range_test_rows(suggested: float) -> Rows:
    """A range test whose log-loss falls fastest at `suggested`, then explodes above 2."""
    rates = np.geomspace(1e-4, 10.0, 200)
    u = np.log10(rates)
    log_loss = -1.5 * np.tanh(2 * (u - math.log10(suggested))) + 20 * np.maximum(0, u - 0.3) ** 2
    return {
        step: {"learning_rate": float(rate), "loss": float(np.exp(value))}
        for step, rate, value in zip(range(1, 201), rates, log_loss, strict=True)
    }


@pytest.mark.parametrize(("best", "expected"), [(0.3, "yes"), (0.01, "no")])
def test_lr_range_test(store, best, expected) -> None:
    def rows(key: str, _: int) -> Rows:
        if key == lr_range_test.TEST:
            return range_test_rows(0.3)
        rate = float(key.split("= ")[1])
        return finals(val_loss=0.4 + abs(math.log10(rate / best)))

    verdict = judged(lr_range_test.RECIPE, store, rows)
    assert verdict.reproduced == expected
    assert 0.2 < verdict.numbers["suggestion"] < 0.45
    assert verdict.numbers["nearest sweep rate"] == 0.3


@pytest.mark.parametrize(("cold", "expected"), [(1.4, "yes"), (0.6, "no")])
def test_warmup(store, cold, expected) -> None:
    def rows(key: str, k: int) -> Rows:
        loss = cold if key == warmup.COLD else 0.6
        return finals(val_loss=loss + 0.05 * k, val_accuracy=0.5)

    verdict = judged(warmup.RECIPE, store, rows)
    assert verdict.reproduced == expected


def test_warmup_counts_a_diverged_run_as_worst(store) -> None:
    results = {
        warmup.COLD: [
            stored(store, finals(loss=math.inf), "diverged") for _ in range(warmup.SEEDS)
        ],
        warmup.WARM: [stored(store, finals(val_loss=0.6)) for _ in range(warmup.SEEDS)],
    }
    verdict = warmup.RECIPE.verdict(results)
    assert verdict.reproduced == "yes"
    assert verdict.numbers["diverged, no warmup"] == warmup.SEEDS


@pytest.mark.parametrize(("plain_trains", "expected"), [(False, "yes"), (True, "no")])
def test_clipping(store, plain_trains, expected) -> None:
    def rows(key: str, _: int) -> Rows:
        trains = key == clipping.CLIPPED or plain_trains
        return {
            step: {"loss": 2.5 * (0.98**step if trains else 0.94), "epoch": step / 22}
            for step in range(1, 111)
        }

    verdict = judged(clipping.RECIPE, store, rows)
    assert verdict.reproduced == expected
    assert verdict.numbers["loss ratio, clipped (worst)"] < clipping.TRAINED


@pytest.mark.parametrize(
    ("epsilons", "accuracies", "expected"),
    [
        ((8.0, 3.7, 1.6), (0.86, 0.79, 0.62), "yes"),
        ((3.7, 3.7, 3.7), (0.86, 0.79, 0.62), "no"),  # one σ everywhere: the control
        ((8.0, 3.7, 1.6), (0.70, 0.79, 0.62), "no"),  # more noise, more accurate
        ((8.0, 3.7, 1.6), (0.80, 0.79, 0.785), "inconclusive"),  # within the seeds
    ],
)
def test_privacy_utility(store, epsilons, accuracies, expected) -> None:
    noises = privacy_utility.NOISES

    def rows(key: str, k: int) -> Rows:
        arm = [privacy_utility.key(noise) for noise in noises].index(key)
        spread = 0.01 * (-1) ** k  # the seeds differ; their mean is the arm's
        return {
            step: {"dp_epsilon": epsilons[arm] * step / 176, "val_accuracy": accuracies[arm]}
            | ({"val_accuracy": accuracies[arm] + spread} if step == 176 else {})
            for step in (1, 88, 176)
        }

    verdict = judged(privacy_utility.RECIPE, store, rows)
    assert verdict.reproduced == expected, verdict.text()
    assert verdict.numbers["ε, σ = 2"] == pytest.approx(epsilons[2])
    assert verdict.numbers["val_accuracy, σ = 0.5 (mean)"] == pytest.approx(accuracies[0])


def test_clipping_between_trained_and_failed_is_inconclusive(store) -> None:
    def rows(key: str, _: int) -> Rows:
        end = 0.94 if key == clipping.PLAIN else 0.5  # clipped: neither trained nor failed
        return {
            step: {"loss": 2.5 * (end if step > 1 else 1.0), "epoch": step / 22}
            for step in range(1, 111)
        }

    assert judged(clipping.RECIPE, store, rows).reproduced == "inconclusive"


@pytest.mark.parametrize(
    ("best", "tied", "expected"),
    [(0.06, False, "inconclusive"), (0.3, True, "no")],
)
def test_lr_range_test_counts_ties_against_the_suggestion(store, best, tied, expected) -> None:
    # 0.06 best: the suggestion's 0.3 ranks 3rd of 6, neither best third nor worse half;
    # every rate scoring alike (the control: one rate for all), it ranks 6th.
    def rows(key: str, _: int) -> Rows:
        if key == lr_range_test.TEST:
            return range_test_rows(0.3)
        rate = float(key.split("= ")[1])
        return finals(val_loss=0.4 if tied else 0.4 + abs(math.log10(rate / best)))

    verdict = judged(lr_range_test.RECIPE, store, rows)
    assert verdict.reproduced == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1.0, 1.1, 1.2], [0.5, 0.6, 0.7], "yes"),
        ([1.0, 0.2, 3.0], [1.0, 0.2, 3.0], "no"),  # the same runs: no difference at all
        ([0.2, 0.3, 0.4], [0.6, 0.7, 0.8], "no"),  # lower: the interval is under 0.5
        ([0.0, 1.0, 2.0], [0.5, 1.0, 1.3], "inconclusive"),  # from below 0 to above 0.5
        ([math.inf, math.inf], [1.0, 2.0], "yes"),  # diverged A: no interval
        ([1.0, 2.0], [math.inf, math.inf], "no"),
        ([1.0, math.inf], [2.0, 3.0], "inconclusive"),
    ],
)
def test_a_paired_test_says_yes_no_or_inconclusive(a, b, expected) -> None:
    assert paired_test(a, b).outcome(smallest=0.5) == expected


def test_pairs_take_out_what_the_seeds_do(store) -> None:
    # The seeds' spread (0.2 to 3.0) is far above the arms' steady 0.1: unpaired, a Welch
    # interval could not tell; seed for seed, the difference is 0.1 at each.
    test = paired_test([1.1, 0.3, 3.1], [1.0, 0.2, 3.0])
    assert test.low == pytest.approx(0.1) and test.high == pytest.approx(0.1)
    assert test.outcome(smallest=0.05) == "yes"


@pytest.mark.parametrize("logged_every", [1, 5])
def test_the_last_epoch_is_the_runs_own(store, logged_every) -> None:
    # digits at batch 64: 1,438 examples make 22 full batches an epoch (not 23), 110 steps
    # in 5 epochs; the step before the last epoch's must not count in it.
    rows = {
        step: {"loss": 0.1 if step > 88 else 1.0, "epoch": step / 22}
        for step in range(1, 111)
        if step % logged_every == 0 or step == 1
    }
    values = last_epoch(stored(store, rows).metrics, "loss")
    assert len(values) == sum(step > 88 for step in rows) and set(values) == {0.1}
    assert clipping.loss_ratio(stored(store, rows)) == pytest.approx(0.1)


@pytest.mark.parametrize(("overshoot", "expected"), [(1.0, "yes"), (1.01, "no")])
def test_projection(store, overshoot, expected) -> None:
    # The weights overshoot the radius while the stage's own `param_norm` says they do
    # not (its formula is never above r): the verdict reads the weights.
    def rows(key: str, _: int) -> Rows:
        radius = 17.0 if key == projection.key(None) else float(key.split("= ")[1])
        norms = {step: radius * min(1.0, step / 100) * overshoot for step in range(1, 301)}
        return {
            step: {
                "weight_norm": norms[step],
                "param_norm": min(norms[step], radius),
                "loss": 0.1,
            }
            | ({"val_loss": 0.4} if step == 300 else {})
            for step in range(1, 301)
        }

    verdict = judged(projection.RECIPE, store, rows)
    assert verdict.reproduced == expected
    assert verdict.numbers["gap val_loss − loss, r = 10"] == pytest.approx(0.3)


def test_a_verdict_while_runs_train_is_partial(store) -> None:
    recipe = edge_of_stability.RECIPE
    first = recipe.arms()[0].key
    rows = {step: {"sharpness": 7.6} for step in range(5, 201, 5)}
    verdict = recipe.verdict({first: [stored(store, rows)]})
    assert verdict.reproduced is None and (verdict.ended, verdict.total) == (1, 2)
    assert verdict.numbers["late median at η=0.25"] == 7.6
    assert "late median at η=0.5" not in verdict.numbers  # not measured yet: not shown
    assert "nan" not in verdict.text() and "nan" not in verdict.sentence
    assert verdict.sentence == "The verdict waits for 1 more run(s): η = 0.5."
    assert verdict.text().startswith("so far (1 of 2 runs ended)\n")
    for each in RECIPES.values():  # no runs ended yet: numbers, and no verdict
        assert each.verdict({}).reproduced is None


def test_the_verdict_text_says_yes_or_no_then_the_numbers() -> None:
    verdict = Verdict("yes", {"a": 1.23456, "b": math.nan}, "It held.", 2, 2)
    assert verdict.text() == "reproduced: yes\nIt held.\n  a = 1.235\n  b = –"


def test_the_recipes_page_shows_the_verdict_table_make_recipes_wrote() -> None:
    from bench.recipes import PAGE, RESULTS, page_table

    written = [line for line in RESULTS.read_text().splitlines() if line.startswith("|")]
    assert page_table(PAGE.read_text()).splitlines() == written
    assert len(written) == 2 + len(RECIPES)  # the header, and a row per recipe


def test_make_recipes_wrote_findings_that_hold_and_controls_that_never_do() -> None:
    """Each row of the table `make recipes` wrote: the recipe said yes at ≥ 4 of 5 seeds,
    or inconclusive at 3 or more (docs/recipes.md says why); its control said yes at
    none."""
    from bench.recipes import RESULTS

    rows = [line.split(" | ") for line in RESULTS.read_text().splitlines()[1:]]
    rows = [row for row in rows if len(row) == 6 and row[2][0].isdigit()]
    assert len(rows) == len(RECIPES)
    for title, _, reproduced, control, _, _ in rows:
        yes, seeds = map(int, reproduced.split(" ")[0].split("/"))
        unsure = re.search(r"(\d+) inconclusive", reproduced)
        assert seeds == 5, title
        assert yes >= 4 or (unsure and int(unsure.group(1)) >= 3), (title, reproduced)
        assert control.startswith(f"0/{seeds}"), (title, control)


def test_running_some_recipes_again_keeps_the_others_results_as_they_were() -> None:
    """`python -m bench.recipes NAME`: the named recipes' rows and sections replaced, the
    others' kept byte for byte, with the machine of the run that wrote them; the same run
    again replaces its own note."""
    from bench.recipes import HEADER, Outcome, merged, results_file, row, section

    def outcome(name: str, said: str) -> Outcome:
        verdicts = [Verdict(said, {"x": 1.0}, f"{name} {said}.", 2, 2)] * 5
        return Outcome(RECIPES[name], verdicts, [Verdict("no", {}, "No.", 2, 2)] * 5, 3.0)

    first = [outcome(name, "yes") for name in list(RECIPES)[:3]]
    written = results_file(
        [row(o) for o in first], [section(o) + "\n" for o in first], ["- Date: then"], 5
    )
    again = merged(written, [outcome(first[1].recipe.name, "no")], ["- Date: now"])
    rows = [line for line in again.splitlines() if line.startswith("| ") and line != HEADER[0]]
    assert [line.split(" | ")[2] for line in rows] == ["5/5", "0/5", "5/5"]
    for kept in (first[0], first[2]):
        assert section(kept) in again and row(kept) in again
    assert "## Verdicts: 2 of 3 reproduced" in again
    assert "- Date: then" in again and "  - Date: now" in again
    assert merged(again, [outcome(first[1].recipe.name, "no")], ["- Date: now"]) == again
    added = merged(again, [outcome("privacy_utility", "yes")], ["- Date: later"])
    assert added.count("\n### ") == 4 and "## Verdicts: 3 of 4" in added
