"""gpuwhy.analysis"""
