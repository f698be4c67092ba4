"""The study's analyses of sections 3-4, one module per question
(delays, Table 2, utilization, convergence, failures)."""
