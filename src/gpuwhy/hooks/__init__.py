"""gpuwhy.hooks"""
