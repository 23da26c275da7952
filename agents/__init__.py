"""cooplab.agents"""
