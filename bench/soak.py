"""Soak: waves of short jobs for a while (10 minutes by default) with the simulated
kubelet. Every job must end Succeeded and be deleted by its TTL; the manager's resident
memory at the end must stay within 5% of what it was after the first wave.

    python -m bench.soak [--minutes 10] [--wave 50]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.lib import Cluster, Kubelet, Manager, Row, create_job, job_doc, write_results
from trainop.api.resources import PODS, SERVICES, job_resource


async def main(minutes: float, wave: int) -> None:
    with Cluster() as cluster:
        kubelet = Kubelet(cluster, run_seconds=1)
        client = cluster.client()
        ns = cluster.namespace("soak")
        manager = Manager(cluster).wait_ready()
        created = succeeded = waves = 0
        rss_first = 0.0
        wave_seconds: list[float] = []
        samples: list[tuple[float, float]] = []
        try:
            end = time.monotonic() + minutes * 60
            while time.monotonic() < end:
                start = time.monotonic()
                before = manager.metric("training_operator_jobs_successful_total")
                for i in range(wave):
                    await create_job(client, job_doc(
                        "JAXJob", {"Worker": 2}, f"w{waves}-{i}", ns,
                        cleanPodPolicy="All", ttlSecondsAfterFinished=0))
                created += wave
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:
                    done = manager.metric("training_operator_jobs_successful_total") - before
                    left = (await client.get(job_resource("JAXJob").path(ns),
                                             {"limit": "1"}))["items"]
                    if done >= wave and not left:
                        break
                    await asyncio.sleep(0.5)
                succeeded += int(manager.metric("training_operator_jobs_successful_total")
                                 - before)
                waves += 1
                wave_seconds.append(time.monotonic() - start)
                samples.append((time.monotonic(), manager.rss_mib()))
                if waves == 1:
                    await asyncio.sleep(2)
                    rss_first = manager.rss_mib()
            await asyncio.sleep(2)
            rss_end = manager.rss_mib()
            events = {o: manager.metric("trainop_events_total", outcome=o)
                      for o in ("sent", "dropped", "failed")}
            leftovers = 0
            for resource in (job_resource("JAXJob"), PODS, SERVICES):
                leftovers += len((await client.get(resource.path(ns)))["items"])
        finally:
            manager.stop()
            kubelet.stop()
            await client.close()
    t0 = samples[0][0]
    curve = ", ".join(f"{(t - t0) / 60:.0f} min {rss:.1f}" for t, rss in
                      samples[:: max(1, len(samples) // 8)] + samples[-1:])
    half = [rss for t, rss in samples if t - t0 >= (samples[-1][0] - t0) / 2]
    write_results("soak", f"Soak: {minutes:g} minutes of job waves (python -m bench.soak)", [
        Row("jobs created", created, None, ""),
        Row("jobs succeeded (and deleted by their TTL)", succeeded, None, "", "all"),
        Row("objects left behind (jobs, pods, services)", leftovers, None, "", "0"),
        Row("manager RSS at the end vs after the first wave", rss_end, rss_first, "MiB",
            "<= 1.05"),
        Row("manager RSS at the end vs half-way", rss_end, half[0], "MiB"),
        Row("events sent to the API server", events["sent"], None, ""),
        Row("events dropped (backlog full) or refused", events["dropped"] + events["failed"],
            None, ""),
        Row("mean seconds per wave", sum(wave_seconds) / len(wave_seconds), None, "s"),
    ], notes=(f"{waves} waves of {wave} JAXJobs x 2 workers, cleanPodPolicy All, "
              f"ttlSecondsAfterFinished 0; the simulated kubelet ran each pod for 1 s. "
              f"Manager RSS (MiB) after waves, by time: {curve}."),
        chart=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--wave", type=int, default=50)
    a = parser.parse_args()
    asyncio.run(main(a.minutes, a.wave))
