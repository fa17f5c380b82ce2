"""The connection: credentials, the connection manager and its cursors (Thrift, the embedded
session, Spark Connect), typed errors, and what a run needs from a connection (`spark_handle`)."""
