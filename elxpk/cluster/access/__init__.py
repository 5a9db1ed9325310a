"""Which cluster a command talks to (ClusterTarget, its defaults and checks) and how to reach it: a kubeconfig
read with bounds, its exec credential plugin, or GKE's API; connect.py turns a target into a `Kube`."""
