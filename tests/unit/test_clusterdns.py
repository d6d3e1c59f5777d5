"""The test cluster's DNS records, as CoreDNS's kubernetes plugin gives them."""

from __future__ import annotations

from trainop.testing.clusterdns import hosts_file, records


def svc(name: str, ip: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"clusterIP": ip}}


def test_cluster_ips_headless_endpoints_and_pod_hostnames() -> None:
    services = [svc("api", "10.96.0.5"), svc("job-worker-0", "None"), svc("job", "None")]
    endpoints = [
        {"metadata": {"name": "api", "namespace": "ns"},  # not headless: the cluster IP
         "subsets": [{"addresses": [{"ip": "10.244.0.9"}]}]},
        {"metadata": {"name": "job-worker-0", "namespace": "ns"},
         "subsets": [{"addresses": [{"ip": "10.244.0.2"}],
                      "notReadyAddresses": [{"ip": "10.244.0.7"}]}]},
        {"metadata": {"name": "job", "namespace": "ns"},  # hostname + subdomain pods
         "subsets": [{"addresses": [{"ip": "10.244.0.3", "hostname": "job-worker-1"}]}]},
    ]
    assert records(services, endpoints) == {
        "api.ns.svc.cluster.local": ["10.96.0.5"],
        "job-worker-0.ns.svc.cluster.local": ["10.244.0.2"],  # ready addresses only
        "job.ns.svc.cluster.local": ["10.244.0.3"],
        "job-worker-1.job.ns.svc.cluster.local": ["10.244.0.3"],
    }


def test_a_headless_service_without_ready_pods_has_no_record() -> None:
    assert records([svc("job-master-0", "None")], [
        {"metadata": {"name": "job-master-0", "namespace": "ns"}, "subsets": None}]) == {}


def test_hosts_file_is_sorted_one_line_per_address() -> None:
    assert hosts_file({"b.ns.svc.cluster.local": ["10.0.0.2"],
                       "a.ns.svc.cluster.local": ["10.0.0.1", "10.0.0.3"]}) == (
        "10.0.0.1 a.ns.svc.cluster.local\n10.0.0.3 a.ns.svc.cluster.local\n"
        "10.0.0.2 b.ns.svc.cluster.local\n")
