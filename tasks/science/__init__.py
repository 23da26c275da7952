"""The four AI-for-Science tasks (ecology, anomaly, biomarker, geospatial): seeded data and ground truth."""
