"""The seven kubeflow.org/v1 kinds trainop serves as upstream does, one module each: its
spec, its model and its facts (KindInfo). Importing the package declares them, in
upstream's order (the order every list of kinds is given in); a plugin's kind is declared
by its own module the same way."""

# isort: off
from trainop.api.jobs import tfjob  # noqa: F401  (each declares its kind, in this order)
from trainop.api.jobs import pytorchjob  # noqa: F401
from trainop.api.jobs import mpijob  # noqa: F401
from trainop.api.jobs import xgboostjob  # noqa: F401
from trainop.api.jobs import paddlejob  # noqa: F401
from trainop.api.jobs import jaxjob  # noqa: F401
from trainop.api.jobs import mxjob  # noqa: F401
# isort: on
