"""Reading the API: the client and its configuration, the shared informers and caches,
the slim records they keep, and `trainop describe`'s reads."""
