"""KIP-932 share groups: membership, share-partition state, sessions and persistence."""
