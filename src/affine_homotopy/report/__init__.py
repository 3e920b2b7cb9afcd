"""Tables and figures: the rank-correlation analysis and the plots.
"""
