"""The project's exceptions: each carries what a user needs to fix the input."""


class GpuAdmissionError(Exception):
    """Base of every error this project raises on purpose."""


class PolicyError(GpuAdmissionError):
    """A policy file does not load: names the file, document and field."""


class InventoryError(GpuAdmissionError):
    """A Node inventory file does not load or is not a list of Nodes."""


class ManifestError(GpuAdmissionError):
    """A manifest file does not parse; names the file and line."""


class ReviewError(GpuAdmissionError):
    """A request is not a valid AdmissionReview (HTTP 400, never a deny)."""


class EvaluationError(GpuAdmissionError):
    """A check raised while judging an object: an internal fault (HTTP 500, exit 2)."""


class QuantityError(ValueError):
    """A string is not a Kubernetes resource quantity."""
