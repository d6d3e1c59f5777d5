"""trainop: one operator for every kubeflow.org/v1 training job kind."""

__version__ = "0.1.0"
