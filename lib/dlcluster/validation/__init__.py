"""The simulator held against the real Philly cluster: replays of the real jobs beside the real queueing and occupancy."""
