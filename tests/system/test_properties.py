"""Bad input, property-based: every invalid run config or optimizer hyperparameter is
refused naming the field, before anything starts or is written; every valid one builds.

The strategies are derived from the `Knob` declarations (type, range, open ends, optional,
choices) of `core.engine.fields()` and of every optimizer in `core.optimizers.specs()`,
plugins included, so a knob added later is covered without touching this file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core import data, models, optimizers
from core.cli import main
from core.engine import TASKS, Engine, RunConfig, fields
from core.knobs import LR_MULT, RULE_WEIGHT_DECAY, InvalidHyperparameters, Knob
from core.optimizers import OptimizerSpec
from core.training.config import FIELD_NAMES, NOT_PRIVATE
from tests.threads import new_threads

SPECS: list[OptimizerSpec] = optimizers.specs()
RUN_FIELDS: tuple[Knob, ...] = fields()
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values of the wrong type for any knob but the ones that take them (see `wrong_types`).
OTHER_TYPES: tuple[Any, ...] = ("0.1", "", "nan", b"1", [], [1.0], {"v": 1}, (1,), object())
NOT_PRINTABLE = ("\n", "\t", "\x00", "\x1b", "\u2028", "\u200b", "\x7f")
BAD_REGEXES = ("(", "[a-", "\\", "*", "a{2,1}", "(?P<x", "+x", "(?<", "a)", "[z-a]")
GOOD_REGEXES = ("dense", "logits", "^conv", "kernel$", ".*", "dense[12]", "(a|b)/bias")
# Smaller magnitudes are float32 subnormals, which a float knob refuses.
FLOAT32_TINY = 2.0**-126


# Strategies from knob declarations -----------------------------------------------------


def _int_bounds(knob: Knob) -> tuple[int | None, int | None]:
    low = None if knob.low is None else math.ceil(knob.low)
    high = None if knob.high is None else math.floor(knob.high)
    if low is not None and knob.low_open and low == knob.low:
        low += 1
    if high is not None and knob.high_open and high == knob.high:
        high -= 1
    return low, high


def _in_range(knob: Knob, value: float) -> bool:
    if knob.low is not None and (value < knob.low or (knob.low_open and value == knob.low)):
        return False
    return knob.high is None or not (value > knob.high or (knob.high_open and value == knob.high))


def _integers(knob: Knob) -> st.SearchStrategy[int]:
    """The whole numbers in the knob's range."""
    low, high = _int_bounds(knob)
    if low is not None and high is not None and low > high:
        return st.nothing()
    return st.integers(low, high)


def valid_values(knob: Knob, *, required: bool = False) -> st.SearchStrategy[Any]:
    """Every value `knob` accepts: its type, within its range, and `None` if optional."""
    if knob.type == "float":
        values = st.one_of(
            st.floats(
                min_value=knob.low,
                max_value=knob.high,
                exclude_min=knob.low_open and knob.low is not None,
                exclude_max=knob.high_open and knob.high is not None,
                allow_nan=False,
                allow_infinity=False,
            ),
            _integers(knob),  # an int is a number too
        ).filter(lambda v: _in_range(knob, v) and (v == 0 or abs(v) >= FLOAT32_TINY))
    elif knob.type == "int":
        values = st.one_of(_integers(knob), _integers(knob).map(float))  # 3.0 is whole
    elif knob.type == "bool":
        values = st.booleans()
    elif knob.type == "choice":
        values = st.sampled_from(knob.choices)
    elif knob.type == "text":
        values = st.text(min_size=1, max_size=40).filter(str.isprintable)
    elif knob.type == "rules":
        values = st.lists(valid_rule(), max_size=3)
    else:
        raise AssertionError(f"no strategy for knob type {knob.type!r}: add one")
    return values | st.none() if knob.optional and not required else values


def valid_rule() -> st.SearchStrategy[dict[str, Any]]:
    pattern = st.sampled_from(GOOD_REGEXES) | st.text("abz_/0", min_size=1, max_size=8)
    return st.fixed_dictionaries(
        {"pattern": pattern},
        optional={
            "lr_mult": valid_values(LR_MULT),
            "weight_decay": valid_values(RULE_WEIGHT_DECAY),
        },
    )


def wrong_types(*allowed: type) -> st.SearchStrategy[Any]:
    return st.sampled_from([v for v in OTHER_TYPES if not isinstance(v, allowed)])


def invalid_values(knob: Knob, *, required: bool = False) -> st.SearchStrategy[Any]:
    """Values `knob` must refuse: out of range, on an open end, NaN, ±inf, huge, of the
    wrong type, unknown choices, bad text, bad rules, and `None` unless optional."""
    options: list[st.SearchStrategy[Any]] = []
    if knob.type in ("float", "int"):
        options += [st.sampled_from([math.nan, math.inf, -math.inf, True, False]), wrong_types()]
        # Up to ±1e300 and ±1.8e308: huge, but within float range (past it: a test below).
        if knob.low is not None:
            below = st.floats(max_value=knob.low, allow_nan=False, allow_infinity=False)
            options.append(below | st.integers(-(10**300), math.ceil(knob.low)))
        if knob.high is not None:
            above = st.floats(min_value=knob.high, allow_nan=False, allow_infinity=False)
            options.append(above | st.integers(math.floor(knob.high), 10**300))
        if knob.type == "int":
            fractional = st.floats(allow_nan=False, allow_infinity=False)
            options.append(fractional.filter(lambda v: not v.is_integer()))
    elif knob.type == "bool":
        options += [st.integers(), st.floats(), st.sampled_from(["true", "false"]), wrong_types()]
    elif knob.type == "choice":
        options += [st.text().filter(lambda v: v not in knob.choices), st.integers()]
        options.append(wrong_types(str))
    elif knob.type == "text":
        printable = st.text(max_size=20).filter(str.isprintable)
        options += [
            st.just(""),
            st.text(min_size=201, max_size=400).filter(str.isprintable),
            st.builds(
                lambda a, c, b: a + c + b, printable, st.sampled_from(NOT_PRINTABLE), printable
            ),
            st.integers(),
            wrong_types(str),
        ]
    elif knob.type == "rules":
        options += [st.text(), st.integers(), st.floats()]  # not lists of rules
        options.append(st.lists(valid_rule(), max_size=2).flatmap(with_a_bad_rule))
    else:
        raise AssertionError(f"no strategy for knob type {knob.type!r}: add one")
    if not knob.optional or required:
        options.append(st.none())
    values = st.one_of(options)
    if knob.type in ("float", "int"):
        # The ranges above end on the bounds, valid when closed (and -0.0 equals 0.0).
        values = values.filter(lambda v: not _a_number_in_range(knob, v))
    return values


def _a_number_in_range(knob: Knob, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return False
    if knob.type == "int" and not float(value).is_integer():
        return False
    return _in_range(knob, value)


def bad_rule() -> st.SearchStrategy[Any]:
    """One rule that must be refused, and nothing else wrong."""
    return st.one_of(
        st.integers(),
        st.text(),
        st.just(["dense", 1.0]),
        st.fixed_dictionaries({"pattern": st.sampled_from(GOOD_REGEXES), "colour": st.just(1)}),
        st.fixed_dictionaries({"lr_mult": valid_values(LR_MULT)}),  # no pattern
        st.fixed_dictionaries({"pattern": st.sampled_from(["", None, 3, b"x"])}),
        st.fixed_dictionaries({"pattern": non_compiling_regex()}),
        st.fixed_dictionaries(
            {"pattern": st.sampled_from(GOOD_REGEXES), "lr_mult": invalid_values(LR_MULT)}
        ),
        st.fixed_dictionaries(
            {
                "pattern": st.sampled_from(GOOD_REGEXES),
                "weight_decay": invalid_values(RULE_WEIGHT_DECAY),
            }
        ),
    )


def with_a_bad_rule(rules: list[dict[str, Any]]) -> st.SearchStrategy[list[Any]]:
    return st.tuples(bad_rule(), st.integers(0, len(rules))).map(
        lambda drawn: [*rules[: drawn[1]], drawn[0], *rules[drawn[1] :]]
    )


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def non_compiling_regex() -> st.SearchStrategy[str]:
    return st.builds(
        lambda head, bad: head + bad, st.text("ab.|", max_size=3), st.sampled_from(BAD_REGEXES)
    ).filter(lambda pattern: not _compiles(pattern))


def task_weights() -> st.SearchStrategy[dict[str, float]]:
    weight = st.floats(0, 1000) | st.integers(0, 1000)
    return st.dictionaries(st.sampled_from(TASKS), weight).filter(
        lambda w: any(w.get(task, 1.0) for task in TASKS)
    )


@st.composite
def valid_run_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid `RunConfig.from_dict` input: any subset of the run fields, an optimizer,
    any subset of its knobs (not `telemetry`, a run field), and task weights."""
    values = {
        knob.name: draw(valid_values(knob))
        for knob in RUN_FIELDS
        if knob.name != "optimizer" and draw(st.booleans())
    }
    # What the fields allow together (each refusal has its own test): rows train with
    # a model that takes any shape, two heads need a built-in model and classes.
    dataset = data.dataset_catalog.info(values.get("dataset", data.DEFAULT_DATASET))
    model = models.model_catalog.info(values.get("model", models.DEFAULT_MODEL))
    if len(dataset.input_shape) != 3 and model.images:
        values["model"] = "mlp"
    if dataset.problem != "classification" or model.source != "core":
        values.pop("multitask", None)
    for name in ("batch_size", "sharpness_examples"):  # at most the training split
        if values.get(name) is not None:  # (valid_values knows no split)
            most = next(knob.high for knob in RUN_FIELDS if knob.name == name)
            values[name] = draw(st.integers(1, min(dataset.train_size, most)))
    if values.get("per_layer_every") is not None:  # on logged steps: a multiple of log_every
        log_every = values.get("log_every", 1)
        values["per_layer_every"] = max(1, values["per_layer_every"] // log_every) * log_every
    if values.get("dp_clip") is not None:  # DP-SGD: a training run, float16 and the
        # instruments that read its data off (each refusal is tested in test_run_config)
        if values.get("kind") == "lr_find":
            del values["kind"]
        if values.get("precision") == "mixed_float16":
            del values["precision"]
        for name in NOT_PRIVATE:
            if values.get(f"{name}_every"):
                values[f"{name}_every"] = 0
    spec = draw(st.sampled_from(SPECS))
    values["optimizer"] = spec.name
    values["hyperparameters"] = {
        knob.name: draw(valid_values(knob, required=knob.name in spec.required))
        for knob in spec.knobs
        if knob.name != "telemetry" and (knob.name in spec.required or draw(st.booleans()))
    }
    if draw(st.booleans()):
        values["task_weights"] = draw(task_weights())
    # A range test's first rate is below its last, the learning rate (refused in
    # test_range_test's own test).
    default_rate = next(k.default for k in spec.knobs if k.name == "learning_rate")
    rate = values["hyperparameters"].get("learning_rate", default_rate)
    if values.get("kind") == "lr_find" and values.get("lr_find_start", 1e-7) >= rate:
        if rate / 2 >= 1e-12:  # lr_find_start's lowest
            values["lr_find_start"] = rate / 2
        else:
            del values["kind"]
    return values


@st.composite
def one_bad_field(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A config with exactly one bad field, and that field's name (the expected error key):
    a run field, an optimizer knob, task weights, hyperparameters, or an unknown name."""
    kind = draw(st.sampled_from(["run", "knob", "knob", "task_weights", "mapping", "unknown"]))
    spec = draw(st.sampled_from(SPECS))
    values: dict[str, Any] = {"optimizer": spec.name}
    if kind == "run":
        knob = draw(st.sampled_from(RUN_FIELDS))
        values[knob.name] = draw(invalid_values(knob))
        return values, knob.name
    if kind == "knob":
        knob = draw(st.sampled_from([k for k in spec.knobs if k.name != "telemetry"]))
        bad = draw(invalid_values(knob, required=knob.name in spec.required))
        values["hyperparameters"] = {knob.name: bad}
        return values, knob.name
    if kind == "task_weights":
        bad_weight = invalid_values(Knob("w", "float", 1.0, "", low=0.0, high=1000.0))
        values["task_weights"] = draw(
            st.one_of(
                st.fixed_dictionaries({draw(st.sampled_from(TASKS)): bad_weight}),
                st.just({"digit": 0, "parity": 0}),
                st.just({"colour": 1.0}),
                wrong_types(dict),
                st.none(),
            )
        )
        return values, "task_weights"
    if kind == "mapping":
        values["hyperparameters"] = draw(st.sampled_from(["lr=1", [1], 3, True, (("a", 1),)]))
        return values, "hyperparameters"
    name = draw(st.text(min_size=1, max_size=20).filter(lambda n: n not in FIELD_NAMES))
    values[name] = 1
    return values, name


# Optimizer hyperparameters ---------------------------------------------------------------


@FAST
@given(st.data())
def test_every_invalid_hyperparameter_of_every_optimizer_is_refused_naming_it(
    data: st.DataObject,
) -> None:
    """For each optimizer and each of its knobs (one invalid value per knob per example),
    `spec.build` raises `InvalidHyperparameters` whose errors name exactly that knob."""
    for spec in SPECS:
        for knob in spec.knobs:
            bad = data.draw(
                invalid_values(knob, required=knob.name in spec.required),
                label=f"{spec.name}.{knob.name}",
            )
            with pytest.raises(InvalidHyperparameters) as caught:
                spec.build(**{knob.name: bad})
            assert set(caught.value.errors) == {knob.name}, (spec.name, bad)
            assert isinstance(caught.value, ValueError)
            assert str(caught.value).startswith(f"{knob.name}: ")


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_every_valid_hyperparameter_set_builds(data: st.DataObject) -> None:
    """Any values within an optimizer's knob declarations build it, and each knob then
    holds the value given (normalized to its type; float32 for a live knob)."""
    spec = data.draw(st.sampled_from(SPECS), label="optimizer")
    given_values = {
        knob.name: data.draw(valid_values(knob, required=knob.name in spec.required), knob.name)
        for knob in spec.knobs
        if knob.name in spec.required or data.draw(st.booleans())
    }
    optimizer = spec.build(**given_values)
    assert isinstance(optimizer, spec.cls)
    knobs = {knob.name: knob for knob in spec.knobs}
    for name, value in given_values.items():
        if name == "layer_rules" or value is None:
            continue
        got = optimizer.get_knob(name)
        if knobs[name].live:  # read back from its float32 variable
            assert np.float32(got) == np.float32(value), name
        else:
            assert got == knobs[name].validate(value), name
    rules = given_values.get("layer_rules") or []
    assert [r.pattern for r in optimizer.get_knob("layer_rules")] == [r["pattern"] for r in rules]


def test_a_knob_that_refuses_zero_never_holds_zero() -> None:
    """A value accepted by a knob whose range is open at 0 is not held as 0: radius=1e-45
    would project every parameter onto the zero ball."""
    try:
        optimizer = optimizers.build("projected_gd", radius=1e-45)
    except InvalidHyperparameters as exc:
        assert set(exc.errors) == {"radius"}
    else:
        assert optimizer.get_knob("radius") > 0


@FAST
@given(st.data())
def test_a_regex_that_does_not_compile_is_refused_naming_the_rule(data: st.DataObject) -> None:
    """A `layer_rules` pattern that is not a regular expression is refused under the
    `layer_rules` field, the message naming the rule's index and `pattern`."""
    rules = data.draw(st.lists(valid_rule(), max_size=3))
    index = data.draw(st.integers(0, len(rules)))
    rules.insert(index, {"pattern": data.draw(non_compiling_regex()), "lr_mult": 1.0})
    spec = data.draw(st.sampled_from(SPECS))
    with pytest.raises(InvalidHyperparameters) as caught:
        spec.build(layer_rules=rules)
    assert set(caught.value.errors) == {"layer_rules"}
    assert f"[{index}].pattern: does not compile" in caught.value.errors["layer_rules"]


def test_an_unknown_knob_or_optimizer_is_refused_naming_it() -> None:
    """A knob no optimizer declares, and an optimizer name no one registered, are refused
    under their own names."""
    for spec in SPECS:
        with pytest.raises(InvalidHyperparameters) as caught:
            spec.build(learning_rat=0.1)
        assert set(caught.value.errors) == {"learning_rat"}
    with pytest.raises(InvalidHyperparameters) as caught:
        optimizers.build("adamz")
    assert set(caught.value.errors) == {"optimizer"}


def test_an_integer_too_large_for_a_float_is_refused() -> None:
    """An integer beyond float range (a 400-digit JSON literal) is refused as invalid,
    not raised as an OverflowError past the validation."""
    with pytest.raises(InvalidHyperparameters) as caught:
        optimizers.build("sgd", learning_rate=10**400)
    assert set(caught.value.errors) == {"learning_rate"}


# Run configs -----------------------------------------------------------------------------


@SLOW
@given(valid_run_configs())
def test_every_valid_run_config_is_accepted_and_round_trips(values: dict[str, Any]) -> None:
    """Any config within the declarations is a `RunConfig`, keeps every given value, and
    comes back equal through `to_dict` and JSON."""
    config = RunConfig.from_dict(values)
    by_name = {knob.name: knob for knob in RUN_FIELDS}
    for name, value in values.items():
        if name in by_name:
            assert getattr(config, name) == by_name[name].validate(value), name
    spec = optimizers.get_spec(config.optimizer)
    for knob in spec.knobs:
        if knob.name in values["hyperparameters"] and knob.type != "rules":
            assert config.hyperparameters[knob.name] == knob.validate(
                values["hyperparameters"][knob.name]
            )
    assert RunConfig.from_dict(config.to_dict()) == config
    assert RunConfig.from_json(config.to_json()) == config


@FAST
@given(one_bad_field())
def test_every_invalid_run_config_is_refused_naming_the_field(
    case: tuple[dict[str, Any], str],
) -> None:
    """One bad field (run field, optimizer knob, task weights, hyperparameters, unknown
    name) is refused with `InvalidHyperparameters` naming exactly that field."""
    values, field = case
    with pytest.raises(InvalidHyperparameters) as caught:
        RunConfig.from_dict(values)
    assert set(caught.value.errors) == {field}, values


@pytest.mark.parametrize("value", [0, "", [], False])
def test_falsy_hyperparameters_of_the_wrong_type_are_refused(value: object) -> None:
    """`hyperparameters` that is not a mapping is refused even when it is falsy."""
    with pytest.raises(InvalidHyperparameters) as caught:
        RunConfig.from_dict({"hyperparameters": value})
    assert set(caught.value.errors) == {"hyperparameters"}


def _files(folder: Path) -> dict[str, str]:
    """The store's files (not the shared-memory index that readers update) and hashes."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.iterdir()
        if not p.name.endswith("-shm")
    }


@pytest.fixture(scope="module")
def idle_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = Engine(tmp_path_factory.mktemp("props") / "lab.sqlite", max_concurrent=2)
    yield engine
    engine.close()


@FAST
@given(case=one_bad_field())
def test_an_engine_starts_nothing_and_writes_nothing_for_an_invalid_config(
    idle_engine: Engine, case: tuple[dict[str, Any], str]
) -> None:
    """`Engine.start` with a bad config raises naming the field, starts no thread, and
    stores nothing: the store's files keep their bytes."""
    values, field = case
    folder = idle_engine.store.path.parent
    threads, files = set(threading.enumerate()), _files(folder)
    with pytest.raises(InvalidHyperparameters) as caught:
        idle_engine.start(values)
    assert set(caught.value.errors) == {field}
    assert idle_engine.list() == []
    assert new_threads(threads) == []
    assert _files(folder) == files


# The command line ------------------------------------------------------------------------


def _json_able(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, tuple)  # a tuple comes back from JSON as a list


def run_main(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=25, deadline=None)
@given(case=one_bad_field())
def test_the_cli_refuses_a_bad_config_file_in_one_line_and_writes_nothing(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[dict[str, Any], str]
) -> None:
    """`train --config FILE` with one bad field exits 2 with one `error: FIELD: …` line,
    prints nothing on stdout and creates no store."""
    values, field = case
    assume(_json_able(values) and "\n" not in field)
    folder = tmp_path_factory.mktemp("cli")
    config, store = folder / "run.json", folder / "lab.sqlite"
    config.write_text(json.dumps(values))
    code, out, err = run_main("train", "--store", store, "--config", config)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {field}: ") and err.count("\n") == 1, err
    assert not store.exists()


NUMBER_FLAGS = [k for k in RUN_FIELDS if k.type == "int"]


@settings(max_examples=25, deadline=None)
@given(
    knob=st.sampled_from(NUMBER_FLAGS),
    text=st.one_of(
        st.text(max_size=12),
        st.sampled_from(["nan", "inf", "-1", "0", "1e999", "2.5", "0x10", "１"]),
    ),
)
def test_the_cli_refuses_a_bad_number_flag_and_writes_nothing(
    tmp_path_factory: pytest.TempPathFactory, knob: Knob, text: str
) -> None:
    """A number flag whose text is no valid value exits 2 naming the field (or, for text
    argparse cannot take as a value, with its usage error) and creates no store."""
    assume(not _valid_flag(knob, text))  # a valid value would start training
    flag = "--" + knob.name.replace("_", "-")
    store = tmp_path_factory.mktemp("flags") / "lab.sqlite"
    code, out, err = run_main("train", "--store", store, f"{flag}={text}")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {knob.name}: ") and err.count("\n") == 1, err
    assert not store.exists()


def _valid_flag(knob: Knob, text: str) -> bool:
    """Whether the CLI would take `text` for `knob` (as int, else float, else text)."""
    if knob.optional and text.lower() == "none":
        return True
    for number in (int, float):
        with contextlib.suppress(ValueError):
            value = number(text)
            break
    else:
        value = text
    try:
        knob.validate(value)
    except ValueError:
        return False
    return True


FLOAT_KNOBS = sorted({knob.name for spec in SPECS for knob in spec.knobs if knob.type == "float"})


@pytest.mark.parametrize("name", FLOAT_KNOBS)
def test_a_float_flag_too_large_for_any_float_exits_2_naming_it(tmp_path: Path, name: str) -> None:
    """`--KNOB 1000…0` (400 digits) for a float knob exits 2 with one line naming the knob,
    not a traceback, and creates no store."""
    store = tmp_path / "lab.sqlite"
    flag = "--" + name.replace("_", "-")
    code, out, err = run_main("train", "--store", store, flag, "1" + "0" * 400)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {name}: ") and err.count("\n") == 1, err
    assert not store.exists()


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"hyperparameters": {"learning_rate": 10**400}}, "learning_rate"),
        ({"task_weights": {"digit": 10**400}}, "task_weights"),
    ],
)
def test_a_config_number_too_large_for_any_float_exits_2_naming_it(
    tmp_path: Path, values: dict[str, Any], field: str
) -> None:
    """A `--config` file with a 400-digit integer exits 2 naming the field, not with a
    traceback, and creates no store."""
    config, store = tmp_path / "run.json", tmp_path / "lab.sqlite"
    config.write_text(json.dumps(values))
    code, out, err = run_main("train", "--store", store, "--config", config)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {field}: ") and err.count("\n") == 1, err
    assert not store.exists()
