"""Talking to a cluster: GKE credentials (google-cloud-container + google.auth) or a kubeconfig,
and the Kubernetes API through the official Python client. Never gcloud or kubectl, never a write
to ~/.kube/config. Everything here is imported lazily by the commands that need a cluster."""
