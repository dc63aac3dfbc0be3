"""Kernel-level analysis of profiler traces: per-step device facts, the HTA-style breakdowns,
kernel-aware findings, and a `Diagnosis` like a recording's (`diagnose_traces`)."""
