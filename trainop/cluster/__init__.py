"""The Kubernetes runtime: API client, shared informers, work queues, controllers, manager."""
