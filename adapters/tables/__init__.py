"""Table stores: in-memory, embedded SQLite and HBase (happybase)."""
