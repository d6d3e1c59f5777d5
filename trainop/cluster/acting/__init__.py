"""Acting: one controller per kind, its work queue and expectations, the plan applier,
events and the metrics of jobs."""
