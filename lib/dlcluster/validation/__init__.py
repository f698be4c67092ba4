"""The simulator's validation against the real Philly cluster.

:mod:`.jobsets`: what each public job set holds, RFold's calendar alignment,
which set carries the real demand. :mod:`.workload`: the replay workload (and
the same from a raw job log). :mod:`.calibrate`: the replay's unknown parameters
and the simulation they give; :mod:`.latency`: the scheduler latency fitted on
real waits; :mod:`.measures`: the replay against the real record, and the
calibration objective; :mod:`.search`: the fit on the first weeks of the real
occupancy data; :mod:`.heldout`: the figures on the rest, the ablation and the
sensitivity.
:mod:`.replay`: replays of the public job sets beside the real queueing delays
(notebook 01) and the peer-compatible check.
"""
