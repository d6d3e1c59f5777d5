"""The test cluster's DNS records, as CoreDNS's kubernetes plugin gives them (from
EndpointSlices)."""

from __future__ import annotations

from testbed.clusterdns import hosts_file, records


def svc(name: str, ip: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"clusterIP": ip}}


def endpoint_slice(service: str, *endpoints: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": f"{service}-x7k2p", "namespace": "ns",
                         "labels": {"kubernetes.io/service-name": service}},
            "endpoints": list(endpoints)}


def test_cluster_ips_headless_endpoints_and_pod_hostnames() -> None:
    services = [svc("api", "10.96.0.5"), svc("job-worker-0", "None"), svc("job", "None")]
    slices = [
        # not headless: the cluster IP
        endpoint_slice("api", {"addresses": ["10.244.0.9"], "conditions": {"ready": True}}),
        endpoint_slice("job-worker-0",
                       {"addresses": ["10.244.0.2"], "conditions": {"ready": True}},
                       {"addresses": ["10.244.0.7"], "conditions": {"ready": False}}),
        # hostname + subdomain pods; readiness not told counts as ready
        endpoint_slice("job", {"addresses": ["10.244.0.3"], "hostname": "job-worker-1"}),
        # a slice of another namespace's Service of the same name
        {**endpoint_slice("job", {"addresses": ["10.244.0.8"]}),
         "metadata": {"name": "job-abc", "namespace": "other",
                      "labels": {"kubernetes.io/service-name": "job"}}},
    ]
    assert records(services, slices) == {
        "api.ns.svc.cluster.local": ["10.96.0.5"],
        "job-worker-0.ns.svc.cluster.local": ["10.244.0.2"],  # ready addresses only
        "job.ns.svc.cluster.local": ["10.244.0.3"],
        "job-worker-1.job.ns.svc.cluster.local": ["10.244.0.3"],
    }


def test_a_headless_service_without_ready_pods_has_no_record() -> None:
    assert records([svc("job-master-0", "None")], [
        {**endpoint_slice("job-master-0"), "endpoints": None}]) == {}


def test_hosts_file_is_sorted_one_line_per_address() -> None:
    assert hosts_file({"b.ns.svc.cluster.local": ["10.0.0.2"],
                       "a.ns.svc.cluster.local": ["10.0.0.1", "10.0.0.3"]}) == (
        "10.0.0.1 a.ns.svc.cluster.local\n10.0.0.3 a.ns.svc.cluster.local\n"
        "10.0.0.2 b.ns.svc.cluster.local\n")
