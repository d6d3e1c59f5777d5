"""Serving: the manager's listening sockets, its metrics and probe endpoints, the
authentication of scrapes, certificates, and the admission and conversion webhook."""
