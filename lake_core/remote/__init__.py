"""The lake over HTTP, client side: the wire protocol (:mod:`.wire`) shared with the server."""
