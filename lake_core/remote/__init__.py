"""The lake over HTTP, client side: :mod:`.wire` (the protocol shared with the server in
``lake_service``), :mod:`.client` (the HTTP transport, httpx), :mod:`.lake` (``RemoteLake`` and
``RemotePool``, what ``Lake.open("http://…")`` returns), :mod:`.uri` (which URIs are remote).
Nothing heavy is imported here: ``lake_core.remote.uri`` is read by every ``Lake.open``."""
