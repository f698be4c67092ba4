"""The ResNet-50 locality and colocation benchmark (Table 4).

It measures on the user's hardware what the trace cannot show.
"""
