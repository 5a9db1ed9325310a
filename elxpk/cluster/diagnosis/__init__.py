"""Why a workload is not running (`status --why`): reasons read from what JobSet, the Job controller, Kueue,
the scheduler and the trainer wrote, each with its fix; and `events`' failures grouped by cause. Pure."""
