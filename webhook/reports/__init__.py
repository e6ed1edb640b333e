"""Rendering results for people and machines: text, JSON, SARIF, JUnit, PolicyReports."""
