"""Checkpoints: orbax saves that are read back and verified (checkpoint), where they live, local or gs://
(storage), and the digests and fingerprints that prove a restore is bitwise the state that was saved."""
