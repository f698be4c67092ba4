"""The simulator's validation against the real Philly cluster.

:mod:`.jobsets`: what each public job set holds, RFold's calendar alignment,
which set carries the real demand. :mod:`.workload`: the replay workload (and
the same from a raw job log). :mod:`.calibrate`: fit the unknown parameters on
the first weeks of the real occupancy data and validate on the rest.
:mod:`.replay`: replays of the public job sets beside the real queueing delays
(notebook 01) and the peer-compatible check.
"""
