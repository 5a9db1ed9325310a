"""The local control plane of the real-cluster tier: `python tools/testcluster build|up|down` (see
__main__.py), and `kubeapi.LocalCluster`, the small HTTP client the tests and benchmarks drive it with."""
