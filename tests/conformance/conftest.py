"""The conformance suite runs the manager on the real API server, as the integration tests
do: the same fixtures (a namespace per test, a manager limited to it)."""

from tests.integration.conftest import kube, manager, start_manager

__all__ = ["kube", "manager", "start_manager"]
