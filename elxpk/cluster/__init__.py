"""Talking to a cluster: GKE credentials (google-cloud-container + google.auth) or a kubeconfig,
and the Kubernetes API: reads through a small urllib3 client (http_client.py, so `status` starts without
the kubernetes and google-auth imports), exec into a pod through the official Python client. Never gcloud
or kubectl, never a write to ~/.kube/config. Everything here is imported lazily by the commands that need a cluster."""
