"""cooplab.evals"""
