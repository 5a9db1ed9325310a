"""What a workload is and went through, read from its objects and the trainer's files: its status (pure), its
incidents and their durable log, the slice a fault took, the trainer's progress and phase, its chip-hours."""
