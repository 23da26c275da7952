"""cooplab.tasks"""
