"""What counts as warm-up, for the analysis (analysis/steady.py) and the live line
(runtime/progress.py) alike."""

WARMUP_FACTOR = 3.0
"""A leading step slower than 3x the median is warm-up: gpuprof's `compilation_warmup` rule
(first step > 3x median, references.md#gpuprof-insights)."""
