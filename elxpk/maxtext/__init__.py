"""MaxText as a workload: the config keys elxpk writes (vendored from MaxText 0.2.5), the overrides the
launcher appends to a MaxText command, and a reader for MaxText's metrics_file. Standard library only:
`workload create --dry-run` imports this package.
"""
