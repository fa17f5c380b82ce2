"""What the user configured: model config and run vars validated into a `Policy`, the one
validation of a node's config, the connection's endpoint and retry policy, `query_timeout`."""
