"""Core-to-core latency: load matrices, recover the CPU topology, advise on pinning."""
