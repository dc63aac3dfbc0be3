"""gpuwhy.runtime: wires sources, hooks and a recording together for `run` and `monitor()`."""
