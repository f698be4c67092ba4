"""Figure 4's confound: a spread job has waited at least the relax timeout, so compare among jobs that waited it."""

import numpy as np
import pandas as pd

from dlcluster.analysis.fig4_confound import confound_text, timeout_confound


def test_the_timeout_floor_and_the_comparison_beyond_it():
    # 5-8 GPUs: spread jobs all waited at least 180 s (the rule), local ones anything; beyond 180 s spread ones
    # wait less
    local = pd.DataFrame({"num_gpus": 8, "num_servers": 1,
                          "queueing_delay_s": np.r_[[10.0] * 10, np.linspace(600, 6000, 20)]})
    spread = pd.DataFrame({"num_gpus": 8, "num_servers": 2, "queueing_delay_s": np.linspace(200, 400, 10)})
    table = timeout_confound(pd.concat([local, spread]).assign(bucket="5-8"), 180.0)
    row = table.loc["5-8"]
    assert (row["jobs"], row["spread"], row["waited_timeout"]) == (40, 10, 30)
    assert row["spread_under_timeout_share"] == 0 and row["local_under_timeout_share"] == 10 / 30
    assert row["spread_median_s"] == 300 and row["local_median_s"] == np.median(np.linspace(600, 6000, 20))
    assert row["p_spread_shorter"] < 0.001
    text = confound_text(table, 180.0)
    assert "not whether spreading shortened their wait" in text and "spread ones waited significantly less" in text
    # a 16-GPU job on two 8-GPU servers is not spread
    big = pd.DataFrame({"num_gpus": [16, 16], "num_servers": [2, 3], "queueing_delay_s": [10.0, 500.0], "bucket": ">8"})
    assert timeout_confound(big, 180.0).loc[">8", "spread"] == 1
