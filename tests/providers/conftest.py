"""The provider runs check accounting and clean stops, never the run's figure: no PNG is drawn
(tests/helpers/figures.py says why that loses nothing)."""

import pytest

from tests.helpers.figures import figures_recorded  # noqa: F401 - a fixture


@pytest.fixture(autouse=True)
def _no_figure_drawing(figures_recorded):  # noqa: F811
    return figures_recorded
