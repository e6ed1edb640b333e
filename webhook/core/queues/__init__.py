"""Kueue queues and ResourceQuotas as the checks read them: model, supply, capacity, assignment."""
