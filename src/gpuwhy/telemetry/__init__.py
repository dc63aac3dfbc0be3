"""gpuwhy.telemetry"""
