// ViewlineKit: write view-models, list them, serve them over the line protocol.
// The wire codec comes along: apps build replies and alerts from its types.
@_exported import ViewlineProtocol
