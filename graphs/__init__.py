"""cooplab.graphs"""
