"""Test support shipped with trainop: a real kube-apiserver and etcd on loopback."""
