"""Export of a recording as a Perfetto / Chrome trace (`trace.write_trace`): spans as slices,
GPU and host metrics as counters, sized to what the trace viewer can open."""
