"""The HTTP APIs elxpk speaks: the Kubernetes API (`Kube`, its transport, bounded answers and one-line errors)
and Cloud Storage's JSON API (gcs.py). Knows nothing of workloads."""
