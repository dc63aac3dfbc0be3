"""gpuwhy.report"""
