"""What a release writes: run directories, published tables, manifest, report, replay.

What a release writes: the run's directories and atomic publication, the decoded synthetic table in its
formats, the audit manifest, the internal error report, and the replay of a seeded release from its manifest.
"""
