"""Talking to a cluster: GKE credentials (google-cloud-container + google.auth) or a kubeconfig,
and the Kubernetes API: reads through a small urllib3 client (api/http_client.py, so `status` starts without
the kubernetes and google-auth imports), exec into a pod through the official Python client. Never gcloud
or kubectl, never a write to ~/.kube/config. Everything here is imported lazily by the commands that need a cluster.

Its rooms, each importing only the ones listed before it:
- objects/: the names the cluster's objects carry (labels, annotations, dates), pure;
- api/: the HTTP APIs elxpk speaks (Kubernetes through `Kube` and its transport, Cloud Storage), bounded;
- access/: which cluster (ClusterTarget and its defaults) and how to reach it (kubeconfig, exec credentials, GKE);
- records/: what a workload is and went through, from its objects and the trainer's files: status, incidents,
  the slice a fault took, progress, chip-hours;
- diagnosis/: why it is not running (`status --why`), and the failures grouped by cause;
- verbs/: the commands that act on or watch a workload: submit, status/list fetches, delete, logs, wait,
  kill-slice and its soak, events, status --watch, and their flags."""
