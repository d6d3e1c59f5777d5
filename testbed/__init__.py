"""The test harness of trainop (tests/ and bench/ import it from the checkout; it is not a
part of the trainop package): a real kube-apiserver and etcd on loopback, a simulated
kubelet, the real single-node cluster, and the peers (upstream's operator, Kueue)."""
