"""The cluster's objects as elxpk reads them: the names they carry and the one place each field is read. Pure."""
