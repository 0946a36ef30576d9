"""The application event stream: a run's events as they happen (`Agent.run_stream`).

The stream is one more trace sink: it sees exactly the redacted, bounded events the stored trace
holds, in the same order, and adds the text deltas of streamed replies (redacted with the run's
rules), budget warnings and a last event carrying the result. The loop core never knows it exists.
"""

from ownloop.streaming._stream import RunStream

__all__ = ["RunStream"]
