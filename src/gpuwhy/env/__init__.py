"""gpuwhy.env"""
