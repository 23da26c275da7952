import numpy as np
import pytest

from cooplab.tasks.cpr.params import make_params
from cooplab.tasks.cpr.society import Condition, init_state


@pytest.fixture
def small_state():
    """A factory for an initial CPR state with chosen traits."""

    def make(replicates=1, population="mixed", seed=0, **params):
        p = make_params(**params)
        return init_state([Condition(p, population)], replicates, seed)

    return make


def set_traits(state, **traits):
    S, N = state["alive"].shape
    for k, v in traits.items():
        state[k] = np.broadcast_to(np.asarray(v, dtype=float), (S, N)).copy()
    return state
