"""gpuwhy.recording"""
