"""Population-based training (Jaderberg et al. 2017) on the lab's runs: `plan` (what a
population asks for, checked), `exploit_explore` (the two moves, pure functions),
`population` (the driver), `lineage` (a population read back from the store, and a
schedule's replay), `figures` (its charts). Importing `core.population` imports neither
TensorFlow nor Optuna."""

from core.population.lineage import TAG_PREFIX
from core.population.plan import PopulationPlan
from core.population.population import Move, Population

__all__ = ["TAG_PREFIX", "Move", "Population", "PopulationPlan"]
