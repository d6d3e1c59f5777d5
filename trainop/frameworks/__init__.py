"""One plugin per framework, registered in one table: adding a framework is one file."""

from __future__ import annotations

from typing import Any

from trainop.engine import Framework
from trainop.frameworks.jax import JAX
from trainop.frameworks.mpi import MPI
from trainop.frameworks.mxnet import MXNet
from trainop.frameworks.paddle import Paddle
from trainop.frameworks.pytorch import PyTorch
from trainop.frameworks.tensorflow import TensorFlow
from trainop.frameworks.xgboost import XGBoost

FRAMEWORKS: dict[str, Framework[Any]] = {
    fw.info.kind: fw
    for fw in (TensorFlow(), PyTorch(), MPI(), XGBoost(), Paddle(), JAX(), MXNet())
}


def framework_for(kind: str) -> Framework[Any]:
    return FRAMEWORKS[kind]


__all__ = ["FRAMEWORKS", "framework_for"]
