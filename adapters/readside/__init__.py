"""The read side: projection host, catalog, rebuild and verify."""
