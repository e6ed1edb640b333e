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


class UnreadableObject(GpuAdmissionError):
    """A field of the object judged that a check must read is malformed (a quota that is
    no quantity, an API version nobody serves): invalid input (HTTP 400, exit 2)."""


class EvaluationError(GpuAdmissionError):
    """A check raised while judging an object: an internal fault (HTTP 500, exit 2)."""


class QuantityError(ValueError):
    """A string is not a Kubernetes resource quantity."""


class WorkloadError(GpuAdmissionError):
    """An object holds more than is judged (too many pod templates): an input error."""
