"""Every optimizer and every knob against the float64 NumPy reference, eager and traced."""

from __future__ import annotations

import zlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from core import optimizers
from core.optimizers import transforms
from tests.optimizer_reference import Reference

# Three variables of different shapes under two layers, so layer rules can tell them apart.
LAYERS = [("body", "kernel", (6, 4)), ("body", "bias", (4,)), ("head", "kernel", (3, 2, 2))]
STEPS = 20
LEARNING_RATE = 0.05

KNOB_CASES: dict[str, dict] = {
    "plain": {},
    "clip_norm": {"clip_norm": 1.5},
    "noise_std": {"noise_std": 0.3, "noise_seed": 7},
    "top_k": {"top_k": 0.3},
    "top_k_error_feedback": {"top_k": 0.3, "top_k_error_feedback": True},
    "weight_decay": {"weight_decay": 0.5},
    "l2": {"l2": 0.1},
    "prune_threshold": {"prune_threshold": 0.3},
    "radius": {"radius": 2.0},
    "layer_rules": {
        "weight_decay": 0.1,
        "layer_rules": [
            {"pattern": "^head/", "lr_mult": 3.0, "weight_decay": 0.9},
            {"pattern": "bias$", "lr_mult": 0.5},
        ],
    },
}
KNOB_CASES["everything"] = {
    key: value for case in KNOB_CASES.values() for key, value in case.items()
}
ALGORITHM_CASES = {
    "momentum": {"nesterov": {"nesterov": True}, "momentum": {"momentum": 0.5}},
    "adam": {
        "epsilon_inside_sqrt": {"epsilon_inside_sqrt": True, "epsilon": 1e-3},
        "betas": {"beta_1": 0.5, "beta_2": 0.9},
    },
}
ALGORITHM_OF = {
    "sgd": "sgd",
    "momentum": "momentum",
    "adam": "adam",
    "adamw": "adam",
    "clipped_adam": "adam",
    "projected_gd": "sgd",
}


def cases() -> list:
    out = []
    for name in ("sgd", "momentum", "adam"):
        out += [(name, case) for case in KNOB_CASES]
        out += [(name, case) for case in ALGORITHM_CASES.get(name, {})]
    out += [
        (name, case)
        for name in ("adamw", "clipped_adam", "projected_gd")
        for case in ("plain", "everything")
    ]
    return out


def case_hparams(name: str, case: str) -> dict:
    hp = KNOB_CASES[case] if case in KNOB_CASES else ALGORITHM_CASES[ALGORITHM_OF[name]][case]
    return {"learning_rate": LEARNING_RATE, **hp}


def make_variables(rng: np.random.Generator) -> list[keras.Variable]:
    variables = []
    for layer, name, shape in LAYERS:
        with keras.name_scope(layer):
            value = rng.normal(size=shape).astype(np.float32)
            variables.append(keras.Variable(value, name=name))
    return variables


def gradient_sequence(rng: np.random.Generator) -> list[list[np.ndarray]]:
    # Scales that vary step to step, so clipping is sometimes active and sometimes not.
    return [
        [
            (rng.normal(size=shape) * rng.uniform(0.05, 0.6)).astype(np.float32)
            for _, _, shape in LAYERS
        ]
        for _ in range(STEPS)
    ]


def noise_draws(hp: dict, step: int) -> list[np.ndarray]:
    return [
        transforms.gradient_noise(shape, tf.float32, hp["noise_seed"], step, i).numpy()
        for i, (_, _, shape) in enumerate(LAYERS)
    ]


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(actual - expected) / max(np.linalg.norm(expected), 1e-12))


def run_reference(name: str, hp: dict, init: list[np.ndarray], grads: list) -> Reference:
    spec = optimizers.get_spec(name)
    ref = Reference(ALGORITHM_OF[name], spec.validate(hp), init, paths())
    for t, g in enumerate(grads):
        ref.step(g, noise_draws(ref.hp, t) if ref.hp["noise_std"] is not None else None)
    return ref


def paths() -> list[str]:
    return [f"{layer}/{name}" for layer, name, _ in LAYERS]


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize(("name", "case"), cases())
def test_matches_float64_reference(name: str, case: str, traced: bool) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{name}/{case}".encode()))
    variables = make_variables(rng)
    assert [v.path for v in variables] == paths()
    grads = gradient_sequence(rng)
    hp = case_hparams(name, case)
    optimizer = optimizers.build(name, **hp)
    ref = Reference(
        ALGORITHM_OF[name],
        optimizers.get_spec(name).validate(hp),
        [v.numpy() for v in variables],
        paths(),
    )

    def apply(g: list[tf.Tensor]) -> None:
        optimizer.apply(g, variables)

    optimizer.build(variables)  # so that tracing creates no variables (one trace, not two)
    apply_fn = tf.function(apply) if traced else apply
    for t, g in enumerate(grads):
        apply_fn([tf.constant(x) for x in g])
        ref.step(g, noise_draws(ref.hp, t) if ref.hp["noise_std"] is not None else None)
        for variable, expected in zip(variables, ref.params, strict=True):
            error = relative_error(variable.numpy(), expected)
            assert error <= 1e-5, f"step {t}, {variable.path}: relative error {error:.2e}"
        if ref.hp["radius"] is not None:
            norm = np.sqrt(sum(np.sum(v.numpy().astype(np.float64) ** 2) for v in variables))
            assert norm <= ref.hp["radius"] * (1 + 1e-6)
    if traced:
        assert apply_fn.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("case", [c for c in KNOB_CASES if c != "plain"])
def test_each_knob_changes_the_trajectory(case: str) -> None:
    # Guards the reference test: with these settings, every knob visibly matters, so an
    # optimizer that ignored it would not match the reference.
    rng = np.random.default_rng(1)
    init = [v.numpy() for v in make_variables(rng)]
    grads = gradient_sequence(rng)
    for name in ("sgd", "adam"):
        with_knob = run_reference(name, case_hparams(name, case), init, grads)
        without = run_reference(name, {"learning_rate": LEARNING_RATE}, init, grads)
        errors = [
            relative_error(a, b) for a, b in zip(with_knob.params, without.params, strict=True)
        ]
        assert max(errors) > 1e-3, f"{case} barely changes {name}: {errors}"


@pytest.mark.parametrize(
    ("name", "hp", "keras_optimizer"),
    [
        ("adamw", {"weight_decay": 0.1}, lambda: keras.optimizers.AdamW(0.01, weight_decay=0.1)),
        ("adam", {}, lambda: keras.optimizers.Adam(0.01)),
        ("sgd", {}, lambda: keras.optimizers.SGD(0.01)),
        ("momentum", {"momentum": 0.8}, lambda: keras.optimizers.SGD(0.01, momentum=0.8)),
        (
            "momentum",
            {"momentum": 0.8, "nesterov": True},
            lambda: keras.optimizers.SGD(0.01, momentum=0.8, nesterov=True),
        ),
    ],
)
def test_equals_keras_step_for_step(name: str, hp: dict, keras_optimizer) -> None:
    rng = np.random.default_rng(2)
    ours, theirs = make_variables(rng), make_variables(np.random.default_rng(2))
    ours_opt = optimizers.build(name, learning_rate=0.01, **hp)
    theirs_opt = keras_optimizer()
    for g in gradient_sequence(rng) + gradient_sequence(rng):
        ours_opt.apply([tf.constant(x) for x in g], ours)
        theirs_opt.apply([tf.constant(x) for x in g], theirs)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_telemetry_reports_what_the_step_did() -> None:
    rng = np.random.default_rng(3)
    variables = make_variables(rng)
    grads = gradient_sequence(rng)
    hp = {"learning_rate": LEARNING_RATE, **KNOB_CASES["everything"], "telemetry": True}
    optimizer = optimizers.build("adam", **hp)
    ref = Reference(
        "adam", optimizers.get_spec("adam").validate(hp), [v.numpy() for v in variables], paths()
    )
    seen = {"clip_active": set(), "projection_active": set()}
    for t, g in enumerate(grads):
        optimizer.apply([tf.constant(x) for x in g], variables)
        ref.step(g, noise_draws(ref.hp, t))
        stats = {k: v.numpy() for k, v in optimizer.stats.items()}
        for key in ("grad_norm", "grad_norm_clipped", "param_norm", "pruned_frozen"):
            np.testing.assert_allclose(stats[key], ref.stats[key], rtol=1e-5, err_msg=key)
        for key in seen:
            assert stats[key] == ref.stats[key], key
            seen[key].add(float(stats[key]))
        # ‖θ' − θ‖ of a small step is a float32 difference of nearby numbers: ~1e-4 relative.
        np.testing.assert_allclose(
            np.sqrt(stats["step_sq"]), np.sqrt(ref.stats["step_sq"]), rtol=1e-3
        )
        param_sq = [np.sum(v.numpy().astype(np.float64) ** 2) for v in variables]
        np.testing.assert_allclose(stats["param_sq"], param_sq, rtol=1e-5)
        assert stats["top_k_kept"] == pytest.approx((8 + 2 + 4) / 40)
    # The sequence exercises both branches of each flag.
    assert seen == {"clip_active": {0.0, 1.0}, "projection_active": {0.0, 1.0}}


def test_without_telemetry_no_statistics_are_kept() -> None:
    optimizer = optimizers.build("sgd", learning_rate=0.1)
    variables = make_variables(np.random.default_rng(0))
    optimizer.apply([tf.ones_like(v.value) for v in variables], variables)
    assert optimizer.stats == {}
    assert len(optimizer.variables) == 2  # iterations and learning rate only


def test_gradient_noise_has_the_given_standard_deviation() -> None:
    # Zero gradients, plain SGD: θ moves by −η·σ·ξ, so (θ₀ − θ₁)/η has std σ, not σ².
    sigma, lr = 0.25, 0.5
    variable = keras.Variable(np.zeros((200, 100), np.float32))
    optimizer = optimizers.build("sgd", learning_rate=lr, noise_std=sigma, noise_seed=3)
    optimizer.apply([tf.zeros((200, 100))], [variable])
    moved = -variable.numpy() / lr
    assert abs(moved.mean()) < 0.01
    assert moved.std() == pytest.approx(sigma, rel=0.02)
    # Another step draws fresh noise.
    before = variable.numpy().copy()
    optimizer.apply([tf.zeros((200, 100))], [variable])
    assert abs(np.corrcoef((variable.numpy() - before).ravel(), moved.ravel())[0, 1]) < 0.05


def test_coupled_l2_is_weight_decay_for_sgd_and_not_for_adam() -> None:
    # θ − η(g + λθ) = θ − ηλθ − ηg: the two agree for SGD. Adam rescales the penalty's
    # gradient with the rest (Loshchilov & Hutter's point), so there they must differ.
    rng = np.random.default_rng(2)
    init = [v.numpy() for v in make_variables(rng)]
    grads = gradient_sequence(rng)
    for name, same in (("sgd", True), ("adam", False)):
        coupled = run_reference(name, {"learning_rate": LEARNING_RATE, "l2": 0.5}, init, grads)
        decoupled = run_reference(
            name, {"learning_rate": LEARNING_RATE, "weight_decay": 0.5}, init, grads
        )
        errors = [
            relative_error(a, b) for a, b in zip(coupled.params, decoupled.params, strict=True)
        ]
        assert (max(errors) < 1e-12) == same, f"{name}: {errors}"
