"""Distributed GPU jobs judged as a whole: the job model and its rules."""
