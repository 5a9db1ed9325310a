"""Notifications of `workload events --watch`: which alerts a watch raises (rules.py), how they are sent
(delivery.py: a webhook, Slack, or a command, off the watch loop's path), and their flags (flags.py)."""
