"""The playground: the lab's own optimizers on 2-D loss surfaces, computed in milliseconds.

```python
from core import playground

path = playground.trajectory("rosenbrock", "momentum", {"learning_rate": 1e-3}, steps=500)
path.points, path.losses, path.diverged        # (501, 2), (501,), False
xs, ys, losses = playground.SURFACES["rosenbrock"].grid()   # the contours under it
```

`surfaces` declares the surfaces (NumPy only), `trajectory` checks the inputs and returns
a `Trajectory`, `runner` steps an optimizer's Keras class on a 2-element variable in a
loop compiled once. Importing this package does not import TensorFlow; the first
trajectory does.
"""

from core.playground.surfaces import SURFACES, Box, Surface, get_surface
from core.playground.trajectory import (
    DEFAULT_STEPS,
    MAX_STEPS,
    Trajectory,
    read_knobs,
    trajectory,
)

__all__ = [
    "DEFAULT_STEPS",
    "MAX_STEPS",
    "SURFACES",
    "Box",
    "Surface",
    "Trajectory",
    "get_surface",
    "read_knobs",
    "trajectory",
]
