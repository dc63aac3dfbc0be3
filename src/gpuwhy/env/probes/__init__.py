"""Scripts that run *inside the target interpreter* (``python script.py``), one per probe.

Each prints exactly one JSON document on stdout. They must run on Python >= 3.8, import nothing of
gpuwhy (the target may not have it), and keep every framework import inside a function.
"""
