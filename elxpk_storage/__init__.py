"""Storage that the launcher and the trainer both touch, declared once: Cloud Storage credentials
(gcs_auth), the checkpoint directory's files, local or gs:// (checkpoint_dir), and the validity record
of a committed step (digest).

The trainer writes checkpoints through it; the launcher's `checkpoint inspect` and the init container's
`python -m elxpk.checkpoints` read and quarantine them with the same definitions, and its `--record gs://`
asks the same credential check. It stands below both, so neither imports the other for it. Unlike
elxpk_contract it is not standard library only: etils.epath (orbax's own file layer) and, lazily,
google-auth; it is never on `workload create --dry-run`'s start-up path. The trainer image ships it.
"""
