"""The verbs on a workload, over the rooms below: submit (with its preflight), the fetches of status and list,
delete, logs, wait, kill-slice and its soak, events and status --watch, how statuses look, and the verbs' flags."""
