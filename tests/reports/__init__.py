"""webhook.reports: PolicyReports, OpenReports, SARIF and JUnit."""
