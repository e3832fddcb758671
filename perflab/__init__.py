"""perflab: make CPU and OS performance phenomena happen on your own machine."""
